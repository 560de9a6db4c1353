//! The ferrotile kernel library, written in the DSL: [`softmax`],
//! [`norm::layer_norm`] and [`norm::rms_norm`], each with a host API that
//! validates shapes and picks block sizes, and an f64 reference in
//! [`reference`].

pub mod norm;
pub mod reference;
pub mod softmax;

pub use norm::{layer_norm, rms_norm};
pub use softmax::softmax;

/// Errors of the library's host APIs.
#[derive(Debug)]
pub enum LibError {
    /// Buffer sizes do not hold the declared shape.
    Shape(String),
    /// An invalid configuration or parameter.
    Config(String),
    /// The launch failed.
    Launch(ferrotile::Error),
}

impl std::fmt::Display for LibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LibError::Shape(s) | LibError::Config(s) => f.write_str(s),
            LibError::Launch(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LibError {}

impl From<ferrotile::Error> for LibError {
    fn from(e: ferrotile::Error) -> Self {
        LibError::Launch(e)
    }
}

pub(crate) fn check_rows(op: &str, name: &str, len: usize, rows: usize, cols: usize, stride: usize) -> Result<(), LibError> {
    if stride < cols {
        return Err(LibError::Shape(format!("{op}: row stride {stride} of `{name}` is smaller than the row length {cols}")));
    }
    let need = if rows == 0 { 0 } else { (rows - 1).checked_mul(stride).and_then(|v| v.checked_add(cols)) .ok_or_else(|| LibError::Shape(format!("{op}: shape overflows")))? };
    if len < need {
        return Err(LibError::Shape(format!("{op}: `{name}` has {len} elements, but {rows} rows of {cols} with stride {stride} need {need}")));
    }
    if rows > u32::MAX as usize || stride > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(LibError::Shape(format!("{op}: {rows}×{cols} (stride {stride}) exceeds the 32-bit grid/stride limits")));
    }
    Ok(())
}
