//! `qrsync-scale`: wiring only (issue 30, being built).

fn main() {
    println!("qrsync-scale: the simulation is being built (issue 30); see tools/scale/README.md");
}
