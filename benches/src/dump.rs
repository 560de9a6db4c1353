//! `ferrotile dump`: a library kernel specialized for given constexprs and
//! dtypes, printed as IR, PTX or WGSL — no GPU needed. With `--ptxas` the
//! PTX is also assembled and ptxas's report (registers, spills, shared
//! memory) printed; the compiler's explanations (dots off the tensor cores,
//! conversions through shared memory) go to stderr as `FERROTILE_EXPLAIN=1`
//! prints them at run time.
//!
//! The options the PTX is emitted with are the runtime's defaults for a
//! launch on aligned buffers (`arg_div` 16 on every integer scalar),
//! `--stages` as `num_stages`, `--unit` naming the scalars known to be 1
//! (the unit strides the runtime detects), guarded unless `--unchecked`,
//! without threaded copies of pipelined loop bodies unless `--unroll` (the
//! CUDA runtime adds them where the driver reports that they do not spill),
//! and with the backward slice rule when `FERROTILE_BROADCAST_SLICES=1`
//! (as the CUDA runtime reads it).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType, Kernel};
use ferrotile_backends::ptx::{emit, PtxOptions};

/// What to print.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Emit {
    /// The specialized IR.
    Ir,
    /// PTX, as the CUDA runtime would load it.
    #[default]
    Ptx,
    /// WGSL, as the wgpu runtime would build it (subgroups and f16 on).
    Wgsl,
}

/// Options of `ferrotile dump`.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(after_help = "Example: ferrotile dump softmax_row --const BLOCK=1024 --dtype T=bf16 --emit ptx --warps 4 --ptxas")]
pub struct DumpArgs {
    /// The library kernel (`ferrotile dump --list` names them all).
    pub kernel: Option<String>,
    /// List the library's kernels with their constexprs and dtype parameters.
    #[arg(long)]
    pub list: bool,
    /// Constexpr values, NAME=VALUE (`true`/`false` for bool constexprs); every constexpr needs one.
    #[arg(long = "const", value_name = "NAME=VALUE", value_delimiter = ',')]
    pub consts: Vec<String>,
    /// Dtypes of the dtype parameters, NAME=DTYPE (f32, f16, bf16, ...); default f32.
    #[arg(long = "dtype", value_name = "NAME=DTYPE", value_delimiter = ',')]
    pub dtypes: Vec<String>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Emit::Ptx)]
    pub emit: Emit,
    /// The PTX target: 80 or 90 (wgmma and TMA need 90).
    #[arg(long, default_value_t = 90)]
    pub sm: u32,
    /// Warps per program.
    #[arg(long, default_value_t = 4)]
    pub warps: u32,
    /// num_stages: the K loops' loads prefetched stages − 1 iterations ahead.
    #[arg(long, default_value_t = 2)]
    pub stages: u32,
    /// Integer scalar parameters known to equal 1 (unit strides), NAME,...
    #[arg(long, value_delimiter = ',')]
    pub unit: Vec<String>,
    /// Without the bounds guards (as `launch_unchecked`).
    #[arg(long)]
    pub unchecked: bool,
    /// Threaded copies of pipelined loop bodies (`PtxOptions::unroll_pipelined`).
    #[arg(long)]
    pub unroll: bool,
    /// Assemble the PTX with ptxas (FERROTILE_PTXAS or scripts/install-ptxas.sh) and print its report.
    #[arg(long)]
    pub ptxas: bool,
}

fn signature(k: &Kernel) -> String {
    let ty: Vec<String> = k.dtype_params.iter().map(|t| format!("{t}: Float")).collect();
    let cx: Vec<String> = k.constexprs.iter().map(|c| format!("const {}: {}", c.name, c.dtype)).collect();
    format!("{}<{}>", k.name, ty.into_iter().chain(cx).collect::<Vec<_>>().join(", "))
}

/// The kernels `--list` prints.
pub fn list() -> String {
    list_of(&ferrotile_kernels::catalog())
}

fn list_of(catalog: &[&'static Kernel]) -> String {
    catalog.iter().map(|k| signature(k) + "\n").collect()
}

/// Specializes `args.kernel` and renders what `args.emit` asks for: the
/// text to print on stdout, and notes for stderr.
pub fn render(args: &DumpArgs) -> Result<(String, Vec<String>), String> {
    render_from(args, &ferrotile_kernels::catalog())
}

/// [`render`] over another set of kernels (`user-suite dump` passes the
/// suite's).
pub fn render_from(args: &DumpArgs, catalog: &[&'static Kernel]) -> Result<(String, Vec<String>), String> {
    if args.list {
        return Ok((list_of(catalog), vec![]));
    }
    let name = args.kernel.as_deref().ok_or("name a kernel (`--list` shows them)")?;
    let k = *catalog.iter().find(|k| k.name == name).ok_or_else(|| format!("no kernel `{name}`; the kernels:\n{}", list_of(catalog)))?;
    let mut notes = vec![];
    let pairs = |list: &[String], what: &str| -> Result<Vec<(String, String)>, String> {
        list.iter()
            .map(|p| p.split_once('=').map(|(a, b)| (a.trim().to_string(), b.trim().to_string())).ok_or_else(|| format!("{what} `{p}`: expected NAME=VALUE")))
            .collect()
    };
    let consts = pairs(&args.consts, "--const")?;
    let dts = pairs(&args.dtypes, "--dtype")?;
    for (n, _) in &consts {
        if !k.constexprs.iter().any(|c| c.name == *n) {
            return Err(format!("`{name}` has no constexpr `{n}`: {}", signature(k)));
        }
    }
    for (n, _) in &dts {
        if !k.dtype_params.contains(n) {
            return Err(format!("`{name}` has no dtype parameter `{n}`: {}", signature(k)));
        }
    }
    let mut cx = vec![];
    for c in &k.constexprs {
        let v = consts.iter().find(|(n, _)| *n == c.name).map(|(_, v)| v.as_str()).ok_or_else(|| format!("missing --const {}=…: {}", c.name, signature(k)))?;
        cx.push(match v {
            "true" => 1,
            "false" => 0,
            v => v.parse::<i64>().map_err(|_| format!("--const {}={v}: not an integer", c.name))?,
        });
    }
    let mut types = vec![];
    for t in &k.dtype_params {
        types.push(match dts.iter().find(|(n, _)| n == t) {
            Some((_, v)) => DType::from_rust(v).ok_or_else(|| format!("--dtype {t}={v}: unknown dtype"))?,
            None => {
                notes.push(format!("{t} = f32 (no --dtype {t}=…)"));
                DType::F32
            }
        });
    }
    let spec = specialize(k, &cx, &types).map_err(|e| e.to_string())?;
    for u in &args.unit {
        if !k.params.iter().any(|p| p.name == *u) {
            return Err(format!("--unit {u}: `{name}` has no parameter `{u}`"));
        }
    }
    let safety = if args.unchecked { Safety::Unchecked } else { Safety::Safe };
    match args.emit {
        Emit::Ir => Ok((spec.to_text(), notes)),
        Emit::Wgsl => {
            let o = ferrotile_backends::wgsl::WgslOptions {
                workgroup_size: args.warps * 32,
                subgroups: true,
                shader_f16: true,
                max_workgroup_storage: 49152,
                arg_div: vec![16; guarded_params(k)],
                arg_one: k.params.iter().map(|p| args.unit.contains(&p.name)).collect(),
                safety,
                ..Default::default()
            };
            let w = ferrotile_backends::wgsl::emit(&spec, &o).map_err(|e| e.to_string())?;
            Ok((w.text, notes))
        }
        Emit::Ptx => {
            let opts = PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                arg_one: k.params.iter().map(|p| args.unit.contains(&p.name)).collect(),
                pipeline: args.stages.saturating_sub(1),
                safety,
                unroll_pipelined: args.unroll,
                broadcast_slices: std::env::var("FERROTILE_BROADCAST_SLICES").is_ok_and(|v| v == "1"),
                affine_addresses: std::env::var("FERROTILE_AFFINE_ADDRESSES").is_ok_and(|v| v == "1"),
                rotate_chains: std::env::var("FERROTILE_ROTATE_CHAINS").map_or(true, |v| v != "0"),
                operand_layouts: std::env::var("FERROTILE_OPERAND_LAYOUTS").map_or(true, |v| v != "0"),
                column_layouts: std::env::var("FERROTILE_COLUMN_LAYOUTS").map_or(true, |v| v != "0"),
                // (as the CUDA runtime takes them)
                late_prefetch: std::env::var("FERROTILE_LATE_PREFETCH").map_or(true, |v| v != "0"),
                inflight_register_a: std::env::var("FERROTILE_INFLIGHT_REG_A").is_ok_and(|v| v == "1"),
                unroll_wgmma: std::env::var("FERROTILE_UNROLL_WGMMA").is_ok_and(|v| v == "1"),
                ..PtxOptions::new(args.sm, args.warps, k.params.len())
            };
            let p = emit(&spec, &opts).map_err(|e| e.to_string())?;
            for (line, why) in &p.fma_dots {
                notes.push(format!("line {line}: dot on the FMA path: {why}"));
            }
            for (line, why) in &p.mma_sync_dots {
                notes.push(format!("line {line}: dot not on wgmma: {why}"));
            }
            for (line, what) in &p.conversions {
                notes.push(format!("line {line}: through shared memory: {what}"));
            }
            notes.push(format!("{} threads, {} bytes of shared memory, {} tensor maps", p.threads, p.smem_bytes, p.tensor_maps.len()));
            if args.ptxas {
                let exe = ferrotile_backends::ptxas::find().ok_or("--ptxas: ptxas not found (set FERROTILE_PTXAS, or run scripts/install-ptxas.sh)")?;
                let r = ferrotile_backends::ptxas::assemble(&exe, &p.text, args.sm).map_err(|e| format!("ptxas: {e}"))?;
                notes.push(format!(
                    "ptxas sm_{}: {} registers, {} bytes spill stores, {} bytes spill loads, {} bytes stack frame, {} bytes shared",
                    args.sm, r.registers, r.spill_stores, r.spill_loads, r.stack_frame, r.shared
                ));
            }
            Ok((p.text, notes))
        }
    }
}

/// `ferrotile dump`; the process's exit code.
pub fn main(args: &DumpArgs) -> i32 {
    main_from(args, &ferrotile_kernels::catalog())
}

/// [`main`] over another set of kernels.
pub fn main_from(args: &DumpArgs, catalog: &[&'static Kernel]) -> i32 {
    match render_from(args, catalog) {
        Ok((text, notes)) => {
            for n in notes {
                eprintln!("{n}");
            }
            println!("{text}");
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kernel: &str, consts: &[&str], dtypes: &[&str], emit: Emit) -> DumpArgs {
        DumpArgs {
            kernel: Some(kernel.into()),
            consts: consts.iter().map(|s| s.to_string()).collect(),
            dtypes: dtypes.iter().map(|s| s.to_string()).collect(),
            emit,
            sm: 90,
            warps: 4,
            stages: 2,
            ..Default::default()
        }
    }

    #[test]
    fn dumps_every_form_and_names_what_is_wrong() {
        let (ir, _) = render(&args("softmax_row", &["BLOCK=1024"], &["T=bf16"], Emit::Ir)).unwrap();
        assert!(ir.contains("bf16"), "{ir}");
        let (ptx, notes) = render(&args("softmax_row", &["BLOCK=1024"], &["T=bf16"], Emit::Ptx)).unwrap();
        assert!(ptx.contains(".entry"), "{ptx}");
        assert!(notes.iter().any(|n| n.contains("128 threads")), "{notes:?}");
        let (wgsl, notes) = render(&args("rms_norm_row", &["BLOCK=256"], &[], Emit::Wgsl)).unwrap();
        assert!(wgsl.contains("@compute"), "{wgsl}");
        assert!(notes.iter().any(|n| n.contains("T = f32")));
        let (gemm, _) = render(&args(
            "gemm_kernel",
            &["BM=128", "BN=128", "BK=64", "GROUP_M=8", "ACT=0", "BIAS=0", "TF32=false", "VIEWS=true"],
            &["T=bf16", "U=bf16"],
            Emit::Ptx,
        ))
        .unwrap();
        assert!(gemm.contains("wgmma"), "the GEMM on sm_90 takes wgmma");
        let e = render(&args("softmax_row", &[], &[], Emit::Ptx)).unwrap_err();
        assert!(e.contains("missing --const BLOCK"), "{e}");
        let e = render(&args("softmax_row", &["BLOCK=64", "NOPE=1"], &[], Emit::Ptx)).unwrap_err();
        assert!(e.contains("no constexpr `NOPE`"), "{e}");
        let e = render(&args("softmax_row", &["BLOCK=64"], &["T=f7"], Emit::Ptx)).unwrap_err();
        assert!(e.contains("unknown dtype"), "{e}");
        let e = render(&args("nope", &[], &[], Emit::Ptx)).unwrap_err();
        assert!(e.contains("no kernel `nope`") && e.contains("softmax_row<T: Float, const BLOCK: i32>"), "{e}");
        assert_eq!(list().lines().count(), ferrotile_kernels::catalog().len());
    }
}
