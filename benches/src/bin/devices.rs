//! Which backends this machine runs, one line each, and why a missing one
//! is missing (the same as `ferrotile devices`; `.ci/run` prints it after
//! the tests as their backend summary).
//!
//! `cargo run --release -p ferrotile-benches --bin devices`

fn main() {
    print!("{}", ferrotile_benches::devices::report());
}
