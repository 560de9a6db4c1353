//! naga validation of emitted WGSL (feature `wgsl`).
//!
//! Parses the text with naga's WGSL front end and runs its validator with
//! every check on and only the capabilities the kernel says it needs
//! (half-float packing when `uses_f16`, subgroup operations when
//! `uses_subgroups`). Returns naga's diagnostic, rendered against the source, on failure.

use super::WgslKernel;
use naga::valid::{Capabilities, ValidationFlags, Validator};

/// Parse and validate WGSL text; `Err` carries naga's rendered diagnostic.
pub fn validate_text(text: &str, f16_in_f32: bool, subgroups: bool) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(text).map_err(|e| format!("WGSL parse error: {}", e.emit_to_string(text)))?;
    let mut caps = Capabilities::empty();
    if f16_in_f32 {
        caps |= Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    }
    if subgroups {
        caps |= Capabilities::SUBGROUP;
    }
    Validator::new(ValidationFlags::all(), caps).validate(&module).map(|_| ()).map_err(|e| format!("naga validation error: {}", e.emit_to_string(text)))
}

/// Validate an emitted kernel.
pub fn validate(k: &WgslKernel) -> Result<(), String> {
    validate_text(&k.text, k.uses_f16, k.uses_subgroups)
}
