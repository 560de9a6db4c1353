//! The public API refuses what it cannot run, as error values: an
//! unavailable forced device, unspecialized IR or mismatched buffers handed
//! to the interpreter, a grid of more than 2^64 programs, a tile of more
//! than 2^20 elements, a buffer larger than the host can allocate.

use ferrotile::interp::{self, InterpArg};
use ferrotile::ir::{specialize, DType};
use ferrotile::prelude::*;
use ferrotile::runtime::{Arg, Storage};

#[kernel]
fn scale<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, B);
    store(y + offs, load(x + offs) * 2.0);
}

#[kernel]
fn huge<const B: i32>(y: Ptr<f32>) {
    store(y, sum(sum(zeros([B, B], f32), axis = 0), axis = 0));
}

#[test]
fn interp_run_checks_its_inputs() {
    let dev = Device::cpu();
    let x = dev.from_slice(&[1.0f32; 8]).unwrap();
    let y = dev.zeros::<f32>(8).unwrap();
    let (ax, ay) = (Arg::buffer(&x), Arg::buffer(&y));
    let (Arg::Buffer { mem: Storage::Host(xm), .. }, Arg::Buffer { mem: Storage::Host(ym), .. }) = (&ax, &ay) else { panic!("host buffers") };
    let args = |n| vec![InterpArg::Buffer { mem: xm, len: n, dtype: DType::F32 }, InterpArg::Buffer { mem: ym, len: 8, dtype: DType::F32 }];
    // unspecialized IR
    let e = interp::run(scale::ir(), 1, [1, 1, 1], &args(8)).unwrap_err().to_string();
    assert!(e.contains("specialized"), "{e}");
    let spec = specialize(scale::ir(), &[8], &[]).unwrap();
    // a length longer than the memory
    let e = interp::run(&spec, 1, [1, 1, 1], &args(9)).unwrap_err().to_string();
    assert!(e.contains("do not fit"), "{e}");
    // a buffer of the wrong dtype
    let bad = vec![InterpArg::Buffer { mem: xm, len: 8, dtype: DType::I32 }, InterpArg::Buffer { mem: ym, len: 8, dtype: DType::F32 }];
    assert!(interp::run(&spec, 1, [1, 1, 1], &bad).is_err());
    // a grid of 2^96 programs
    let e = interp::run(&spec, 1, [u32::MAX; 3], &args(8)).unwrap_err().to_string();
    assert!(e.contains("grid"), "{e}");
    interp::run(&spec, 1, [1, 1, 1], &args(8)).unwrap();
}

#[test]
fn tiles_hold_at_most_2_to_the_20_elements() {
    let dev = Device::cpu();
    let mut y = dev.zeros::<f32>(1).unwrap();
    let e = huge::launch(&dev, 1, &mut y, 1 << 11).unwrap_err().to_string();
    assert!(e.contains("2^20"), "{e}");
    huge::launch(&dev, 1, &mut y, 1 << 10).unwrap();
}

#[test]
fn a_forced_device_that_is_missing_is_an_error() {
    // (one test sets the variable: tests in this file run in one process)
    std::env::set_var("FERROTILE_DEVICE", "nonsense");
    assert!(Device::best().is_err());
    std::env::set_var("FERROTILE_DEVICE", "cpu");
    assert_eq!(Device::best().unwrap().kind(), ferrotile::DeviceKind::Cpu);
    std::env::remove_var("FERROTILE_DEVICE");
    assert!(Device::best().is_ok());
}

/// `Arg`'s fields are public: a length larger than the memory behind a
/// buffer is refused (interpreter) or clamped to that memory (the guards'
/// lengths on GPUs), never trusted.
#[test]
fn a_claimed_length_beyond_the_memory_is_not_trusted() {
    let dev = Device::cpu();
    let x = dev.from_slice(&[1.0f32; 8]).unwrap();
    let mut y = dev.zeros::<f32>(8).unwrap();
    let Arg::Buffer { mem, .. } = Arg::buffer(&x) else { panic!("a buffer") };
    let fake = Arg::Buffer { mem, dtype: DType::F32, len: 1 << 20, device: &dev, writable: false };
    let mut args = [fake, Arg::buffer_mut(&mut y)];
    let r = ferrotile::runtime::launch(scale::ir(), &dev, LaunchConfig::from(1u32), &mut args, &[8], &[]);
    assert!(r.unwrap_err().to_string().contains("do not fit"));
}

/// A buffer the host cannot hold is an error value — a size whose bytes
/// overflow, or one past the allocator's maximum — not the panic or abort
/// of an infallible allocation; `zeros` and `full` alike.
#[test]
fn a_buffer_too_large_to_allocate_is_an_error() {
    let dev = Device::cpu();
    for len in [usize::MAX, usize::MAX / 2, usize::MAX / 4, (1usize << 62) - 1] {
        let z = dev.zeros::<f32>(len).map(|b| b.len());
        assert!(matches!(&z, Err(e) if e.to_string().contains("overflow") || e.to_string().contains("host memory")), "zeros({len}): {z:?}");
        let f = dev.full::<f32>(len, 1.0).map(|b| b.len());
        assert!(matches!(&f, Err(e) if e.to_string().contains("overflow") || e.to_string().contains("host memory")), "full({len}): {f:?}");
    }
    // and the ordinary sizes still hold what they should
    assert_eq!(dev.full::<f32>(5, 2.5).unwrap().to_vec().unwrap(), vec![2.5; 5]);
    assert_eq!(dev.full::<ferrotile::bf16>(3, ferrotile::bf16::ONE).unwrap().to_vec().unwrap(), vec![ferrotile::bf16::ONE; 3]);
    assert_eq!(dev.zeros::<i32>(4).unwrap().to_vec().unwrap(), vec![0; 4]);
}
