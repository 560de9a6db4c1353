//! `ferrotile::nccl` (feature `nccl`): error values where NCCL cannot run
//! (a CPU device, no driver, no libnccl, bad lengths), and the collectives'
//! results on every CUDA device of the machine (one rank per device, one
//! thread per rank; a machine with one GPU runs one rank).
#![cfg(feature = "nccl")]

use ferrotile::nccl::{group, Comm, ReduceOp};
use ferrotile::Device;

#[test]
fn cpu_devices_are_refused() {
    let e = Comm::for_devices(&[Device::cpu()]).unwrap_err().to_string();
    assert!(e.contains("NCCL runs on CUDA devices"), "{e}");
    assert!(Comm::for_devices(&[]).unwrap().is_empty());
}

fn cuda_devices() -> Vec<Device> {
    (0..).map_while(|i| Device::cuda(i).ok()).collect()
}

#[test]
fn collectives_on_every_gpu() {
    let devs = cuda_devices();
    if devs.is_empty() {
        eprintln!("skipped: no CUDA device");
        return;
    }
    let comms = match Comm::for_devices(&devs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let n = comms.len();
    let e = Comm::for_devices(&[devs[0].clone(), devs[0].clone()]).unwrap_err().to_string();
    assert!(e.contains("listed twice"), "{e}");
    const LEN: usize = 1001;
    // rank r holds r + 1 + i/LEN in element i
    let val = |r: usize, i: usize| (r + 1) as f32 + i as f32 / LEN as f32;
    std::thread::scope(|s| {
        for comm in comms {
            s.spawn(move || {
                let dev = comm.device().clone();
                let r = comm.rank();
                assert_eq!(comm.world_size(), n);
                let mine: Vec<f32> = (0..LEN).map(|i| val(r, i)).collect();
                let sum: Vec<f32> = (0..LEN).map(|i| (0..n).map(|q| val(q, i)).sum()).collect();
                let mut b = dev.from_slice(&mine).unwrap();
                comm.all_reduce(&mut b, ReduceOp::Sum).unwrap();
                assert_eq!(b.to_vec().unwrap(), sum, "all_reduce sum, rank {r}");
                let mut b = dev.from_slice(&mine).unwrap();
                comm.all_reduce(&mut b, ReduceOp::Max).unwrap();
                assert!(b.to_vec().unwrap().iter().enumerate().all(|(i, v)| *v == val(n - 1, i)), "all_reduce max, rank {r}");
                // (bf16 too: the type maps)
                let mut h = dev.from_slice(&[ferrotile::bf16::from_f32((r + 1) as f32); 17]).unwrap();
                comm.all_reduce(&mut h, ReduceOp::Sum).unwrap();
                assert!(h.to_vec().unwrap().iter().all(|v| v.to_f32() == (n * (n + 1) / 2) as f32));
                let input = dev.from_slice(&mine).unwrap();
                let mut out = dev.zeros::<f32>(LEN * n).unwrap();
                comm.all_gather(&input, &mut out).unwrap();
                let want: Vec<f32> = (0..n).flat_map(|q| (0..LEN).map(move |i| val(q, i))).collect();
                assert_eq!(out.to_vec().unwrap(), want, "all_gather, rank {r}");
                let mut part = dev.zeros::<f32>(LEN).unwrap();
                comm.reduce_scatter(&out, &mut part, ReduceOp::Sum).unwrap();
                // (every rank's `out` is the gathered vector: block r × n)
                let want: Vec<f32> = (0..LEN).map(|i| n as f32 * val(r, i)).collect();
                assert_eq!(part.to_vec().unwrap(), want, "reduce_scatter, rank {r}");
                let mut b = dev.from_slice(&mine).unwrap();
                comm.broadcast(&mut b, 0).unwrap();
                assert_eq!(b.to_vec().unwrap(), (0..LEN).map(|i| val(0, i)).collect::<Vec<_>>(), "broadcast, rank {r}");
                // bad arguments are errors, not collectives
                let e = comm.all_gather(&input, &mut dev.zeros::<f32>(LEN * n + 1).unwrap()).unwrap_err().to_string();
                assert!(e.contains("expected"), "{e}");
                let e = comm.broadcast(&mut b, n).unwrap_err().to_string();
                assert!(e.contains("root"), "{e}");
                let e = comm.all_reduce(&mut Device::cpu().zeros::<f32>(4).unwrap(), ReduceOp::Sum).unwrap_err().to_string();
                assert!(e.contains("not of rank"), "{e}");
                let e = comm.all_reduce(&mut dev.zeros::<ferrotile::f8e4m3>(4).unwrap(), ReduceOp::Sum).unwrap_err().to_string();
                assert!(e.contains("no f8e4m3 collectives"), "{e}");
            });
        }
    });
    // one thread driving every rank inside a group
    let comms = Comm::for_devices(&devs).unwrap();
    let mut bufs: Vec<_> = comms.iter().map(|c| c.device().from_slice(&[c.rank() as f32 + 1.0; 8]).unwrap()).collect();
    group(|| comms.iter().zip(bufs.iter_mut()).try_for_each(|(c, b)| c.all_reduce(b, ReduceOp::Sum))).unwrap();
    for b in &bufs {
        assert!(b.to_vec().unwrap().iter().all(|v| *v == (n * (n + 1) / 2) as f32));
    }
}
