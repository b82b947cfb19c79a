"""BatchNorm's training pass on a CUDA GPU in four kernel launches (two each way).

Written with cupy's array operators, a training BatchNorm is some fifteen launches each
way, and on a GPU each launch costs the host about as much as the work itself (an H100
ResNet-18 step spent 0.36 ms of Python per BatchNorm call, the device waiting). Here:

- forward: one block per channel computes the mean and the biased variance (two passes
  over the channel, accumulated in float64) and updates the running statistics; one
  elementwise kernel normalizes, scales and shifts;
- backward: one block per channel sums ``g`` and ``g * xhat`` (``xhat`` recomputed from the
  input, so nothing but the per-channel mean and 1/std is kept); one elementwise kernel
  forms the input gradient.

The float32 arithmetic per element is the CPU engine's (``(x - mean) * inv_std * gamma +
beta``; ``(g - xhat * ggamma/n - gbeta/n) * gamma * inv_std``), so results agree within
float32 rounding of the sums. Float32 data and parameters only; the caller keeps the
general path for anything else.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..backend import cupy

_THREADS = 512
_MAX_ELEMENTS = 2**31 - 1

# the block size, defined once: the launches below and the kernels' shared arrays use it
_SOURCE = f"#define THREADS {_THREADS}\n" + r"""

__device__ double block_sum(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads();
    return total;
}

// x viewed as (outer, C, inner); block c reduces channel c.
__device__ __forceinline__ unsigned int at(unsigned int i, unsigned int C, unsigned int inner,
                                           unsigned int c) {
    unsigned int o = i / inner;
    return (o * C + c) * inner + (i - o * inner);
}

extern "C" __global__ void rudder_bn_stats(
        const float* x, unsigned int C, unsigned int inner, unsigned int count, float eps,
        float momentum, float* mean_out, float* inv_std_out, float* running_mean,
        float* running_var) {
    __shared__ double shared[THREADS];
    unsigned int c = blockIdx.x;
    double acc = 0.0;
    for (unsigned int i = threadIdx.x; i < count; i += THREADS) acc += x[at(i, C, inner, c)];
    float mean = (float)(block_sum(acc, shared) / count);
    acc = 0.0;
    for (unsigned int i = threadIdx.x; i < count; i += THREADS) {
        float d = x[at(i, C, inner, c)] - mean;
        acc += (double)d * d;
    }
    float var = (float)(block_sum(acc, shared) / count);
    if (threadIdx.x == 0) {
        mean_out[c] = mean;
        inv_std_out[c] = 1.0f / sqrtf(var + eps);
        running_mean[c] = running_mean[c] * momentum + mean * (1.0f - momentum);
        running_var[c] = running_var[c] * momentum + var * (1.0f - momentum);
    }
}

extern "C" __global__ void rudder_bn_backward_stats(
        const float* x, const float* g, unsigned int C, unsigned int inner,
        unsigned int count, const float* mean, const float* inv_std, float* gbeta,
        float* ggamma) {
    __shared__ double shared[THREADS];
    unsigned int c = blockIdx.x;
    float m = mean[c], s = inv_std[c];
    double sum_g = 0.0, sum_gx = 0.0;
    for (unsigned int i = threadIdx.x; i < count; i += THREADS) {
        unsigned int k = at(i, C, inner, c);
        float gv = g[k];
        sum_g += gv;
        sum_gx += (double)(gv * ((x[k] - m) * s));
    }
    float total_g = (float)block_sum(sum_g, shared);
    float total_gx = (float)block_sum(sum_gx, shared);
    if (threadIdx.x == 0) {
        gbeta[c] = total_g;
        ggamma[c] = total_gx;
    }
}
"""


@cache
def _kernels() -> tuple[Any, Any, Any, Any]:
    assert cupy is not None
    module = cupy.RawModule(code=_SOURCE, options=("--std=c++14",))
    normalize = cupy.ElementwiseKernel(
        "float32 x, raw float32 mean, raw float32 inv_std, raw float32 gamma, "
        "raw float32 beta, uint32 C, uint32 inner",
        "float32 y",
        "unsigned int c = ((unsigned int)i / inner) % C;"
        "y = (x - mean[c]) * inv_std[c] * gamma[c] + beta[c];",
        "rudder_bn_normalize")
    input_grad = cupy.ElementwiseKernel(
        "float32 x, float32 g, raw float32 mean, raw float32 inv_std, raw float32 gamma, "
        "raw float32 gbeta, raw float32 ggamma, float32 count, uint32 C, uint32 inner",
        "float32 gx",
        "unsigned int c = ((unsigned int)i / inner) % C;"
        "float xhat = (x - mean[c]) * inv_std[c];"
        "float d = g - xhat * (ggamma[c] / count);"
        "d = d - gbeta[c] / count;"
        "gx = d * (gamma[c] * inv_std[c]);",
        "rudder_bn_input_grad")
    return (module.get_function("rudder_bn_stats"),
            module.get_function("rudder_bn_backward_stats"), normalize, input_grad)


def applies(x: Any, *params: Any) -> bool:
    """Whether these arrays take the fused path: float32 cupy arrays of a size the 32-bit
    indexing covers, with at least one value per channel."""
    if cupy is None or not isinstance(x, cupy.ndarray) or x.dtype != cupy.float32:
        return False
    if x.size == 0 or x.size > _MAX_ELEMENTS or x.ndim < 2:
        return False
    return all(isinstance(p, cupy.ndarray) and p.dtype == cupy.float32 for p in params)


class TrainingNormGpu:
    """One training BatchNorm over channel ``axis`` of ``x``: :meth:`forward` then, for
    the gradient, :meth:`backward`."""

    def __init__(self, x: Any, axis: int) -> None:
        self.x = cupy.ascontiguousarray(x)  # type: ignore[union-attr]
        self.channels = int(x.shape[axis])
        inner = 1
        for size in x.shape[axis + 1:]:
            inner *= int(size)
        self.inner = inner
        self.count = int(x.size) // self.channels
        self.mean: Any = None
        self.inv_std: Any = None

    def _geometry(self) -> tuple[Any, Any, Any]:
        return (cupy.uint32(self.channels), cupy.uint32(self.inner),  # type: ignore[union-attr]
                cupy.uint32(self.count))  # type: ignore[union-attr]

    def forward(self, gamma: Any, beta: Any, running_mean: Any, running_var: Any,
                eps: float, momentum: float) -> Any:
        stats, _, normalize, _ = _kernels()
        xp = cupy
        assert xp is not None
        c, inner, count = self._geometry()
        self.mean = xp.empty(self.channels, dtype=xp.float32)
        self.inv_std = xp.empty(self.channels, dtype=xp.float32)
        stats((self.channels,), (_THREADS,),
              (self.x, c, inner, count, xp.float32(eps), xp.float32(momentum), self.mean,
               self.inv_std, running_mean, running_var))
        return normalize(self.x, self.mean, self.inv_std, gamma, beta, c, inner)

    def backward(self, g: Any, gamma: Any) -> tuple[Any, Any, Any]:
        """(input gradient, gamma gradient, beta gradient)."""
        _, backward_stats, _, input_grad = _kernels()
        xp = cupy
        assert xp is not None
        g = xp.ascontiguousarray(g, dtype=xp.float32)
        c, inner, count = self._geometry()
        gbeta = xp.empty(self.channels, dtype=xp.float32)
        ggamma = xp.empty(self.channels, dtype=xp.float32)
        backward_stats((self.channels,), (_THREADS,),
                       (self.x, g, c, inner, count, self.mean, self.inv_std, gbeta, ggamma))
        gx = input_grad(self.x, g, self.mean, self.inv_std, gamma, gbeta, ggamma,
                        xp.float32(self.count), c, inner)
        return gx, ggamma, gbeta
