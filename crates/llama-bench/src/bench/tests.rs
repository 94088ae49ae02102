//! Tests of `bench.rs`: how a command line is shown.

use super::*;

#[test]
fn plain_words_are_shown_as_they_are_and_others_quoted() {
    let args: Vec<OsString> = ["-m", "my model.gguf", "-C", "0x3", "it's", "", "a\nb"]
        .into_iter()
        .map(OsString::from)
        .collect();
    assert_eq!(
        shown_command(Path::new("bin/llama-bench"), &args),
        r"bin/llama-bench -m 'my model.gguf' -C 0x3 'it'\''s' '' 'a\nb'"
    );
}

#[test]
fn the_command_line_of_an_invalid_run_is_an_error() {
    let bench = LlamaBench::new("llama-bench");
    assert_eq!(
        bench
            .command_line(Path::new("m.gguf"), &Run::decode(2, 16))
            .unwrap(),
        "llama-bench -m m.gguf -o json -r 5 -p 0 -n 16 -t 2"
    );
    assert!(matches!(
        bench.command_line(Path::new("m.gguf"), &Run::decode(0, 16)),
        Err(Error::InvalidRun { .. })
    ));
}
