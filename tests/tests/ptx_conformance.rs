//! Every kernel specialization the conformance suite launches (on the CPU
//! interpreter) is also emitted as PTX and assembled with ptxas for sm_80 and
//! sm_90, with integer arguments both divisible and not divisible by 16.
//! Reports "skipped: no ptxas" when ptxas is missing.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::Device;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use std::sync::{Arc, Mutex};

#[test]
fn conformance_kernels_assemble() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let specs: Arc<Mutex<Vec<ferrotile::ir::Kernel>>> = Arc::default();
    let s2 = specs.clone();
    ferrotile::runtime::set_specialization_observer(move |k| s2.lock().unwrap().push(k.clone()));
    let dev = Device::cpu();
    for c in ferrotile_tests::conformance::cases() {
        // outcomes are checked by conformance_cpu; here we only want the kernels
        let _ = ferrotile_tests::conformance::run_case(&c, &dev, 7);
    }
    let specs = specs.lock().unwrap().clone();
    assert!(specs.len() >= 20, "too few specializations captured: {}", specs.len());
    let mut failures = vec![];
    let mut worst_spill = (0u32, String::new());
    for k in &specs {
        for div16 in [false, true] {
            for sm in [80, 90] {
                let opts = PtxOptions {
                    arg_div: vec![if div16 { 16 } else { 1 }; guarded_params(k)],
                    pipeline: 1,
                    warp_specialize: true,
                    ..PtxOptions::new(sm, 4, k.params.len())
                };
                match emit(k, &opts) {
                    Err(e) => failures.push(format!("emit {} [{}]: {e}", k.name, k.describe_binding())),
                    Ok(p) => match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) => {
                            let sp = r.spill_loads + r.spill_stores;
                            if sp > worst_spill.0 {
                                worst_spill = (sp, format!("{} [{}] sm_{sm}: {} regs", k.name, k.describe_binding(), r.registers));
                            }
                        }
                        Err(log) => failures.push(format!(
                            "ptxas {} [{}] sm_{sm}:\n{}",
                            k.name,
                            k.describe_binding(),
                            log.lines().take(6).collect::<Vec<_>>().join("\n")
                        )),
                    },
                }
            }
        }
    }
    println!("{} specializations assembled for sm_80 and sm_90; largest spill: {} bytes ({})", specs.len(), worst_spill.0, worst_spill.1);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}
