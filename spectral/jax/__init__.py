"""The JAX / optax runtime that every generated JAX config module calls (placeholder)."""
