//! Tests of `bench.rs`: how a command line is shown, and the default thread count read from
//! the help.

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

#[test]
fn the_default_thread_count_is_read_from_the_help_line_of_threads() {
    let help = "usage: llama-bench [options]\n\n  -r, --repetitions <n>  (default: 5)\n  \
                -t, --threads <n>                                 (default: 12)\n  \
                -C, --cpu-mask <hex,hex>  (default: 0x0)\n";
    assert_eq!(parse_default_threads(help), Some(12));
    assert_eq!(
        parse_default_threads("  -t, --threads <n>  (default: 0)"),
        None
    );
    assert_eq!(
        parse_default_threads("  -t, --threads <n>  (default: x)"),
        None
    );
    assert_eq!(
        parse_default_threads("  -r, --repetitions <n>  (default: 5)"),
        None
    );
}

#[test]
fn the_probes_wait_at_most_the_probe_timeout() {
    let bench = LlamaBench::new("llama-bench");
    assert_eq!(bench.run_timeout(), DEFAULT_TIMEOUT);
    assert_eq!(bench.probe_timeout(), PROBE_TIMEOUT);
    let short = bench.timeout(Duration::from_secs(3));
    assert_eq!(short.probe_timeout(), Duration::from_secs(3));
}
