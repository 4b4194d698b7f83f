//! Pure domain logic (no I/O).
