"""Rudder's training engine: an MXNet-Gluon-compatible library on numpy (cupy on GPU)."""
