//! The README's Rust example is the code of `crates/auto-tuner/examples/readme.rs`, which
//! `cargo test --workspace` compiles: an API change that breaks the README's example fails
//! the build rather than a user's first try.

mod common;

/// The README's one Rust block, its fences left out.
fn readme_block(readme: &str) -> &str {
    let start = readme
        .find("```rust\n")
        .expect("the README has a Rust block")
        + "```rust\n".len();
    let end = start
        + readme[start..]
            .find("\n```")
            .expect("the Rust block is closed");
    &readme[start..=end]
}

#[test]
fn the_readme_example_is_the_compiled_example() {
    let root = common::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example =
        std::fs::read_to_string(root.join("crates/auto-tuner/examples/readme.rs")).unwrap();
    // The example's code: everything after its `//!` header and the blank line that ends it.
    let code: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!"))
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        readme_block(&readme),
        code,
        "README.md's Rust block and crates/auto-tuner/examples/readme.rs differ: change both"
    );
}
