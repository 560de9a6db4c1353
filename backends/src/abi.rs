//! The contract between code generation and the runtime's drivers: what a
//! driver must know to launch a generated kernel, and nothing about how it
//! was generated. The PTX and WGSL backends fill these in (`PtxKernel`,
//! `WgslKernel`); `ferrotile::runtime`'s CUDA and wgpu drivers read them.
//!
//! - CUDA: how each kernel parameter is passed ([`ParamAbi`]) and, per TMA
//!   parameter, the tensor map to encode ([`TensorMapArgs`], resolved per
//!   launch from the kernel's recipe).
//! - wgpu: the bindings ([`BindingAbi`]: one storage buffer per pointer
//!   parameter, one uniform struct for the scalars, [`UniformField`]).

use ferrotile_ir::DType;

/// How the host passes each parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamAbi {
    /// 64-bit device address.
    Ptr,
    /// 32 bits (i32, u32, f32; i8/u8/bool widened).
    B32,
    /// 64 bits (i64).
    B64,
    /// 16 bits (f16, bf16).
    B16,
}

/// A tensor map's encoding inputs, innermost dimension first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapArgs {
    /// Device address of the map's first element, in bytes (16-byte aligned).
    pub address: u64,
    /// Extent of each dimension, in elements, innermost first.
    pub dims: Vec<u64>,
    /// Byte strides of dimensions 1.. (the innermost is contiguous).
    pub strides: Vec<u64>,
}

impl TensorMapArgs {
    /// Whether every element the map addresses (elements of `elem_bytes`
    /// bytes) lies in the buffer at `ptr` of `len_bytes` bytes: the host's
    /// side of the guard a TMA view does not get in the kernel.
    pub fn fits(&self, elem_bytes: u64, ptr: u64, len_bytes: u64) -> bool {
        if self.dims.contains(&0) {
            return true;
        }
        let mut last = (self.dims[0] - 1).checked_mul(elem_bytes);
        for (d, s) in self.dims[1..].iter().zip(&self.strides) {
            last = last.and_then(|l| l.checked_add((d - 1).checked_mul(*s)?));
        }
        let end = ptr.checked_add(len_bytes);
        match (last.and_then(|l| l.checked_add(elem_bytes)).and_then(|l| self.address.checked_add(l)), end) {
            (Some(last_end), Some(end)) => self.address >= ptr && last_end <= end,
            _ => false,
        }
    }
}

/// One field of the uniform block: the scalar parameter `param` at byte
/// `offset`. Fields are 4 bytes: i32/u32/f32 as themselves, i8 as a
/// sign-extended i32, u8 and bool (0/1) as u32, f16/bf16 as their bit
/// pattern in the low 16 bits of a u32; i64 takes 8 bytes (little-endian,
/// 4-byte aligned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniformField {
    /// Index of the scalar kernel parameter.
    pub param: u32,
    /// Byte offset of the field in the uniform struct.
    pub offset: u32,
    /// The parameter's dtype, which decides its encoding (above).
    pub dtype: DType,
}

/// What one WGSL binding holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// Pointer parameter `param`: a storage buffer of `dtype` elements (32-bit
    /// dtypes as themselves, f16/bf16/i8/u8 packed little-endian in u32
    /// words: the buffer's byte size must be rounded up to a multiple of 4).
    /// `read_only` buffers are `var<storage, read>`.
    Storage {
        /// Index of the pointer parameter.
        param: u32,
        /// Element dtype of the buffer.
        dtype: DType,
        /// The kernel never writes through the pointer.
        read_only: bool,
    },
    /// All scalar parameters in one `var<uniform>` struct of `size` bytes
    /// (rounded up to 16).
    Uniform {
        /// One field per scalar parameter, in parameter order.
        fields: Vec<UniformField>,
        /// Size of the struct in bytes (a multiple of 16).
        size: u32,
    },
}

/// One `@group(group) @binding(binding)` resource. Every pointer parameter
/// gets a binding whether the kernel uses it or not (so the runtime should
/// build an explicit bind-group layout from this list rather than rely on
/// an automatic one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingAbi {
    /// The `@group` index (the emitter puts every binding in group 0).
    pub group: u32,
    /// The `@binding` index within the group.
    pub binding: u32,
    /// What the binding holds.
    pub kind: BindingKind,
}

#[cfg(test)]
mod tests {
    use super::TensorMapArgs;

    /// A 2-D map of 4-byte elements: 10 rows of 8, row stride 64 bytes,
    /// so the last element ends at byte 9·64 + 8·4 = 608 past the start.
    #[test]
    fn a_tensor_map_fits_only_inside_its_buffer() {
        let m = |address| TensorMapArgs { address, dims: vec![8, 10], strides: vec![64] };
        assert!(m(0x1000).fits(4, 0x1000, 608));
        assert!(!m(0x1000).fits(4, 0x1000, 607), "one byte short");
        assert!(!m(0x0ff0).fits(4, 0x1000, 4096), "starts before the buffer");
        assert!(m(0x1010).fits(4, 0x1000, 624));
        assert!(!m(0x1010).fits(4, 0x1000, 623));
        let batched = TensorMapArgs { address: 0x1000, dims: vec![8, 10, 3], strides: vec![64, 1024] };
        assert!(batched.fits(4, 0x1000, 2 * 1024 + 608));
        assert!(!batched.fits(4, 0x1000, 2 * 1024 + 607));
        let empty = TensorMapArgs { address: 0, dims: vec![0, 10], strides: vec![64] };
        assert!(empty.fits(4, 0x1000, 0), "an empty map touches nothing");
        let huge = TensorMapArgs { address: 0x1000, dims: vec![8, u64::MAX], strides: vec![64] };
        assert!(!huge.fits(4, 0x1000, u64::MAX - 0x1000), "overflow is a misfit");
    }
}
