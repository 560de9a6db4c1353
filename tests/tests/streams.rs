//! Streams, events and cudarc interop (`ferrotile::Stream`,
//! `ferrotile::interop`).
//!
//! On every device present (the CPU interpreter always; wgpu and CUDA
//! where they are): work inside `Stream::scope` is correct and ordered by
//! events; reading back waits for every stream. On CUDA also: two streams
//! overlap (two one-program kernels on two streams take clearly less than
//! twice one), a buffer dropped while another stream's kernel uses it is
//! freed only after it (run under compute-sanitizer on the H200), graph
//! replay and `time_ms` follow the scope, and memory and streams pass to
//! and from cudarc without copies. Without a CUDA driver those print
//! "skipped: no CUDA driver".

use ferrotile::prelude::*;
use ferrotile::Stream;
use ferrotile_tests::kernels::spin;

/// `y = x + 1`.
#[kernel]
fn add_one(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 256 + arange(0, 256);
    let mask = offs < n;
    store(y + offs, load(x + offs, mask, 0.0) + 1.0, mask);
}

fn devices() -> Vec<Device> {
    let mut v = vec![Device::cpu()];
    match Device::wgpu() {
        Ok(d) => v.push(d),
        Err(e) => println!("skipped on wgpu: {e}"),
    }
    match Device::cuda(0) {
        Ok(d) => v.push(d),
        Err(e) => println!("skipped on cuda: {e}"),
    }
    v
}

#[test]
fn scoped_work_is_ordered_by_events_on_every_device() {
    for dev in devices() {
        let n = 1000usize;
        let iters = if dev.kind() == ferrotile::DeviceKind::Cuda { 20000 } else { 50 };
        let (s1, s2) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
        let mut x = dev.full(n, 7.0f32).unwrap();
        let mut y = dev.full(n, f32::NAN).unwrap();
        // s1: x ← 2·3 = 6 after the spin; s2 waits for it, then y = x + 1
        s1.scope(|| spin::launch(&dev, n.div_ceil(128) as u32, &mut x, n as i32, 3.0, iters)).unwrap();
        let e = s1.record().unwrap();
        s2.wait(&e).unwrap();
        s2.scope(|| add_one::launch(&dev, n.div_ceil(256) as u32, &x, &mut y, n as i32)).unwrap();
        // reading back waits for every stream
        assert!(y.to_vec().unwrap().iter().all(|&v| v == 7.0), "{}: y = x + 1 after the spin", dev.name());
        let done = s2.record().unwrap();
        done.synchronize().unwrap();
        assert!(done.is_done().unwrap());
        let t = e.elapsed_ms(&done).unwrap();
        assert!(t.is_finite() && t >= 0.0, "{}: {t} ms", dev.name());
        // the library inside a scope; then time_ms in a scope
        let xs = dev.from_slice(&vec![1.0f32; 4 * 64]).unwrap();
        let mut ys = dev.zeros::<f32>(4 * 64).unwrap();
        let ms =
            s1.scope(|| dev.time_ms(|| ferrotile_kernels::softmax(&dev, &xs, &mut ys, 4, 64).map_err(|e| ferrotile::Error::Buffer(e.to_string())))).unwrap();
        assert!(ms.is_finite() && ms >= 0.0);
        assert!(ys.to_vec().unwrap().iter().all(|&v| (v - 1.0 / 64.0).abs() < 1e-6), "{}", dev.name());
        // scopes nest and end
        s1.scope(|| s2.scope(|| add_one::launch(&dev, 4, &xs, &mut ys, 256))).unwrap();
        dev.synchronize().unwrap();
        assert_eq!(ys.to_vec().unwrap()[0], 2.0);
        println!("{}: ok", dev.name());
    }
}

#[test]
fn events_of_another_device_are_an_error() {
    let Ok(cuda) = Device::cuda(0) else {
        println!("skipped: no CUDA driver");
        return;
    };
    let cpu = Device::cpu();
    let e = cpu.new_stream().unwrap().record().unwrap();
    assert!(cuda.new_stream().unwrap().wait(&e).is_err());
}

#[test]
fn raw_cuda_buffers_need_a_cuda_device() {
    // SAFETY: refused before the address is used.
    let r = unsafe { ferrotile::Buffer::<f32>::from_raw_cuda(&Device::cpu(), 0x1000, 4) };
    assert!(matches!(r, Err(ferrotile::Error::DeviceUnavailable(_))), "{r:?}");
    assert!(Device::cpu().cudarc_context().is_err());
    assert_eq!(Device::cpu().from_slice(&[1.0f32]).unwrap().cuda_ptr(), None);
    assert!(Device::cpu().new_stream().unwrap().raw_cuda().is_none());
}

fn cuda() -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            println!("skipped: no CUDA driver ({e})");
            None
        }
    }
}

#[test]
fn cuda_streams_overlap() {
    let Some(dev) = cuda() else { return };
    let n = 128usize;
    let iters = 400_000;
    let mut a = dev.zeros::<f32>(n).unwrap();
    let mut b = dev.zeros::<f32>(n).unwrap();
    let run = |a: &mut ferrotile::Buffer<f32>, b: &mut ferrotile::Buffer<f32>, two: bool| {
        let (s1, s2) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
        dev.synchronize().unwrap();
        let t = std::time::Instant::now();
        s1.scope(|| spin::launch(&dev, 1, a, n as i32, 1.0, iters)).unwrap();
        if two {
            s2.scope(|| spin::launch(&dev, 1, b, n as i32, 2.0, iters)).unwrap();
        } else {
            s1.scope(|| spin::launch(&dev, 1, b, n as i32, 2.0, iters)).unwrap();
        }
        dev.synchronize().unwrap();
        t.elapsed().as_secs_f64()
    };
    run(&mut a, &mut b, true); // compile
    let one = run(&mut a, &mut b, false);
    let two = run(&mut a, &mut b, true);
    println!("two one-program kernels: {:.2} ms on one stream, {:.2} ms on two", one * 1e3, two * 1e3);
    assert!(two < 0.75 * one, "no overlap: {two} s on two streams vs {one} s on one");
    assert!(a.to_vec().unwrap().iter().all(|&v| v == 2.0) && b.to_vec().unwrap().iter().all(|&v| v == 4.0));
}

#[test]
fn cuda_buffer_dropped_while_another_stream_uses_it() {
    let Some(dev) = cuda() else { return };
    let s = dev.new_stream().unwrap();
    for _ in 0..3 {
        let mut x = dev.zeros::<f32>(1 << 16).unwrap();
        s.scope(|| spin::launch(&dev, (1 << 16) / 128, &mut x, 1 << 16, 1.0, 100_000)).unwrap();
        // freed only after the kernel (the drop waits for every stream);
        // compute-sanitizer reports a use after free otherwise
        drop(x);
    }
    let mut y = dev.zeros::<f32>(256).unwrap();
    s.scope(|| spin::launch(&dev, 2, &mut y, 256, 1.0, 10)).unwrap();
    assert!(y.to_vec().unwrap().iter().all(|&v| (v - 2.0).abs() < 0.01));
}

#[test]
fn cuda_graph_replays_on_the_scoped_stream() {
    let Some(dev) = cuda() else { return };
    let x = dev.from_slice(&[1.0f32; 256]).unwrap();
    let mut y = dev.zeros::<f32>(256).unwrap();
    add_one::launch(&dev, 1, &x, &mut y, 256).unwrap();
    let g = dev.capture(|| add_one::launch(&dev, 1, &x, &mut y, 256)).unwrap();
    let s = dev.new_stream().unwrap();
    let before = s.record().unwrap();
    s.scope(|| g.replay()).unwrap();
    let after = s.record().unwrap();
    assert!(before.elapsed_ms(&after).unwrap() >= 0.0);
    s.synchronize().unwrap();
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

#[test]
fn cudarc_slices_and_streams_pass_without_copies() {
    let Some(dev) = cuda() else { return };
    let ctx = dev.cudarc_context().unwrap();
    let cs = ctx.new_stream().unwrap();
    let host: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let slice = cs.clone_htod(&host).unwrap();
    // a cudarc slice as a ferrotile buffer, worked on in the cudarc stream
    let x = ferrotile::Buffer::from_cudarc(&dev, slice).unwrap();
    let addr = x.cuda_ptr().unwrap();
    let out = cs.alloc_zeros::<f32>(1000).unwrap();
    let mut y = ferrotile::Buffer::from_cudarc(&dev, out).unwrap();
    let s = Stream::from_cudarc(&dev, &cs).unwrap();
    assert_eq!(s.raw_cuda().unwrap(), cs.cu_stream());
    s.scope(|| add_one::launch(&dev, 4, &x, &mut y, 1000)).unwrap();
    // back to cudarc: the same memory
    let back = y.into_cudarc().unwrap();
    let got = cs.clone_dtoh(&back).unwrap();
    assert_eq!(got, host.iter().map(|v| v + 1.0).collect::<Vec<_>>());
    // buffers not made from a slice do not turn into one
    let own = dev.from_slice(&host).unwrap();
    assert!(own.into_cudarc().is_err());
    // a ferrotile buffer lent to cudarc: cudarc reads and writes it in place
    let mut z = dev.from_slice(&host).unwrap();
    {
        let mut loan = z.as_cudarc(&cs).unwrap();
        assert_eq!(cs.clone_dtoh(&*loan).unwrap(), host);
        cs.memcpy_htod(&vec![5.0f32; 1000], &mut *loan).unwrap();
    }
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 5.0));
    // raw pointers: a view of x's memory, kept alive by x
    // SAFETY: `x` owns the memory and outlives `view`.
    let view = unsafe { ferrotile::Buffer::<f32>::from_raw_cuda(&dev, addr, 1000) }.unwrap();
    assert_eq!(view.to_vec().unwrap(), host);
    drop(view);
    assert_eq!(x.to_vec().unwrap(), host);
    // SAFETY: refused before use (misaligned)
    assert!(unsafe { ferrotile::Buffer::<f32>::from_raw_cuda(&dev, addr + 2, 4) }.is_err());
}

#[test]
fn pinned_buffers_copy_asynchronously_and_safely_on_every_device() {
    for dev in devices() {
        let n = 1 << 20;
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let s = dev.new_stream().unwrap();
        let mut p = dev.pinned_from_slice(&host).unwrap();
        let mut x = dev.zeros::<f32>(n).unwrap();
        let mut y = dev.zeros::<f32>(n).unwrap();
        s.scope(|| x.upload(&p)).unwrap();
        // overwriting the source waits for the queued upload: x keeps `host`
        p.copy_from_slice(&vec![-1.0; n]).unwrap();
        s.scope(|| add_one::launch(&dev, n.div_ceil(256) as u32, &x, &mut y, n as i32)).unwrap();
        let mut back = dev.pinned::<f32>(n).unwrap();
        s.scope(|| y.download(&mut back)).unwrap();
        let got = back.to_vec().unwrap(); // waits for the download
        assert!(got.iter().zip(&host).all(|(g, h)| *g == h + 1.0), "{}", dev.name());
        assert!(p.to_vec().unwrap().iter().all(|&v| v == -1.0));
        // lengths and devices are checked
        assert!(x.upload(&dev.pinned::<f32>(3).unwrap()).is_err());
        if dev.kind() != ferrotile::DeviceKind::Cpu {
            assert!(x.upload(&Device::cpu().pinned::<f32>(n).unwrap()).is_err());
        }
        // a pinned buffer dropped with a copy in flight waits for it
        let q = dev.pinned_from_slice(&host).unwrap();
        s.scope(|| x.upload(&q)).unwrap();
        drop(q);
        assert_eq!(x.to_vec().unwrap()[999], 999.0);
        println!("{}: pinned copies ok", dev.name());
    }
}
