//! Side-by-side measurements of the project's pieces against their peers.
//!
//! [`contenders`] defines every timed call, ours and the peers', once; the `perf` report and
//! the criterion benches (`benches/*.rs`) both run them. Each other module measures one
//! area and returns a [`Section`]; the `perf` binary merges the sections into one JSON
//! object (`cargo xtask perf --json`) or one human table. [`regress`] measures the ratios
//! `cargo xtask bench-regress` checks against `benches/floors.json`. [`qmatmul`] measures the
//! quantized kernels against the read and candle.
#![deny(missing_docs)]

pub mod contenders;
pub mod dispatch;
pub mod matmul;
pub mod qmatmul;
pub mod regress;
mod section;

pub use section::Section;

/// Writes `text` to stdout whole. A reader that went away (a closed pipe, `| head`) is no
/// error; any other failure (a full disk, a closed stdout) is, for the program to report
/// rather than panic as `println!` does.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    write_whole(std::io::stdout().lock(), text)
}

/// [`write_stdout`] to `out`.
fn write_whole(mut out: impl std::io::Write, text: &str) -> std::io::Result<()> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// [`write_stdout`], or the program's error line and exit 1.
pub fn print_or_exit(program: &str, text: &str) {
    if let Err(e) = write_stdout(text) {
        eprintln!("{program}: cannot write the output: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind, Write};

    /// A stdout whose every write fails with `kind`.
    struct Failing(ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(Error::from(self.0))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_stdout_is_an_error_and_a_closed_pipe_is_not() {
        let full = super::write_whole(Failing(ErrorKind::StorageFull), "text\n").unwrap_err();
        assert_eq!(full.kind(), ErrorKind::StorageFull);
        assert!(super::write_whole(Failing(ErrorKind::BrokenPipe), "text\n").is_ok());
        let mut out = Vec::new();
        super::write_whole(&mut out, "text\n").unwrap();
        assert_eq!(out, b"text\n");
    }
}
