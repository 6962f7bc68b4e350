//! Links `cairn` as a position-dependent executable on Linux (`-no-pie`): the agents'
//! hooks start one `cairn` process per tool call, and a position-independent `cairn`
//! had the dynamic loader apply ~52,000 relocations at each start, copying the pages
//! of `.data.rel.ro` they write (a third of the page faults of a hook process). Only
//! the executable's own image loses address randomisation; its libraries, heap and
//! stack keep theirs.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=cairn=-no-pie");
    }
}
