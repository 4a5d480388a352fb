"""Locks: env specs solved into committed, hashed locks (pip with uv, conda with py-rattler)."""
