"""``mx.sym.random``, ``mx.sym.linalg`` and ``mx.sym.op``: MXNet's sub-namespaces of the
symbol operators (the same operators as ``mx.sym.random_uniform``, ``mx.sym.linalg_gemm2``
and ``mx.sym.<name>``)."""
