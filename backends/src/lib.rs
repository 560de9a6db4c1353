//! GPU backends (PTX, WGSL) — see ARCHITECTURE.md.
