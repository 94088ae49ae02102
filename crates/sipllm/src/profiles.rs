//! `sipllm profile …`: list, show, clear, export and import the cached profiles. The work is
//! the tuner's (`auto_tuner::{list_profiles, …}`); this module parses and renders.

use crate::output::{Guarded, check_output, user_store, write_whole};
use crate::output::{emit, emit_report};
use crate::progress::say;
use crate::render::{answer_lines, measurement_table};
use crate::stop::Stop;
use auto_tuner::{
    AutoTunerOptions, MAX_BUNDLE_BYTES, StoredProfile, TunerError, shown, shown_path,
};
use device_profile::HardwareInfo;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The profile commands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ProfileCommand {
    /// Every profile in the user's cache and the system store: id, workload, thread limit,
    /// when and by which version and kernel it was tuned, partial or not, and whether this
    /// machine would use it (or why not).
    List {
        /// One JSON array on stdout.
        #[arg(long)]
        json: bool,
    },
    /// One profile, readable: where it is, whether it is valid here, the answer and the
    /// table of every configuration measured. ID is a name from `sipllm profile list`
    /// (default: this machine's default profile).
    Show {
        /// The profile's id (its file name without .json).
        id: Option<String>,
        /// The profile document as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Remove this machine's profiles from the user's cache (under the lock). The system
    /// store is never touched.
    Clear {
        /// Remove every machine's profiles from the user's cache.
        #[arg(long)]
        all: bool,
    },
    /// Write every valid profile of this machine (all workloads and thread limits) as one
    /// JSON bundle, for `sipllm profile import` on an identical machine or for a system
    /// store. Only the cache's own files are exported: a copy under another name
    /// (`<id>_backup.json`) or a symbolic link is left out with a warning.
    Export {
        /// Write the bundle to FILE (whole or not at all) instead of stdout; its directory
        /// must exist, and a file replaced keeps its permission bits.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Install the profiles of a bundle written by `sipllm profile export`, all or nothing,
    /// after checking each one (schema, hardware_id, kernel, and the machine it was tuned on).
    Import {
        /// The bundle ("-" for stdin).
        file: PathBuf,
        /// Install profiles tuned on a machine whose details differ from this one's (same
        /// hardware_id): they are adopted as this machine's.
        #[arg(long)]
        force: bool,
    },
}

/// Runs `command` and returns the exit code.
pub fn run(command: &ProfileCommand, hw: &HardwareInfo, opt: &AutoTunerOptions) -> ExitCode {
    let result = match command {
        ProfileCommand::List { json } => list(hw, opt, *json).map_err(Stop::from),
        ProfileCommand::Show { id, json } => {
            show(hw, opt, id.as_deref(), *json).map_err(Stop::from)
        }
        ProfileCommand::Clear { all } => clear(hw, opt, *all).map_err(Stop::from),
        ProfileCommand::Export { output } => export(hw, opt, output.as_deref()).map_err(Stop::from),
        ProfileCommand::Import { file, force } => import(hw, opt, file, *force),
    };
    match result {
        Ok(Output::Stdout(text)) => emit("sipllm", &text),
        Ok(Output::Done { report, done }) => emit_report("sipllm", &report, Some(done)),
        Ok(Output::Written) => ExitCode::SUCCESS,
        Err(stop) => stop.report("sipllm"),
    }
}

/// What a command produced.
enum Output {
    /// Text for stdout.
    Stdout(String),
    /// The report of a change made (`done` says which, should the report be lost).
    Done { report: String, done: &'static str },
    /// Nothing more to show (the command wrote its file and said so on stderr).
    Written,
}

fn list(hw: &HardwareInfo, opt: &AutoTunerOptions, json: bool) -> Result<Output, TunerError> {
    let profiles = listed(hw, opt);
    if json {
        let rows: Vec<serde_json::Value> = profiles.iter().map(list_json).collect();
        return Ok(Output::Stdout(format!(
            "{}\n",
            serde_json::Value::Array(rows)
        )));
    }
    let mut s = String::new();
    if profiles.is_empty() {
        let _ = writeln!(s, "no cached profiles");
        return Ok(Output::Stdout(s));
    }
    let header = [
        "store", "id", "workload", "limit", "rigor", "tuned at", "version", "kernel", "partial",
        "status",
    ]
    .map(String::from);
    let mut rows = vec![header];
    for p in &profiles {
        // Every text of the file (its name, a profile that is not this machine's) is shown
        // through the tuner's one sanitizer.
        let field = |f: &dyn Fn(&auto_tuner::RuntimeProfile) -> String| {
            p.profile
                .as_ref()
                .map_or_else(|| "-".to_string(), |r| shown(&f(r)))
        };
        let status = match &p.valid {
            Ok(()) => {
                let mut status = format!("valid{}", serves(p.profile.as_ref()));
                if p.link {
                    status.push_str(", a symbolic link (never exported)");
                }
                status
            }
            Err(why) => format!("not used: {why}"),
        };
        rows.push([
            p.store.name().to_string(),
            shown(&p.id),
            field(&|r| r.request.workload.name.clone()),
            field(&|r| r.request.thread_limit.to_string()),
            field(&|r| r.rigor.to_string()),
            field(&|r| r.tuned_at.clone().unwrap_or_else(|| "-".into())),
            field(&|r| r.crate_version.clone()),
            field(&|r| r.kernel.clone()),
            field(&|r| if r.partial { "yes" } else { "no" }.to_string()),
            status,
        ]);
    }
    // Each column as wide as its widest cell; the thread limit right-aligned, the status
    // last and unpadded.
    const LIMIT_COLUMN: usize = 3;
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..rows[0].len() - 1).map(width).collect();
    for row in &rows {
        let Some((status, padded)) = row.split_last() else {
            continue;
        };
        let mut line = String::new();
        for ((c, cell), &w) in padded.iter().enumerate().zip(&widths) {
            let _ = if c == LIMIT_COLUMN {
                write!(line, "{cell:>w$}  ")
            } else {
                write!(line, "{cell:<w$}  ")
            };
        }
        line.push_str(status);
        let _ = writeln!(s, "{line}");
    }
    Ok(Output::Stdout(s))
}

/// The profiles of both stores; a store that cannot be read is a warning, not an error.
fn listed(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Vec<StoredProfile> {
    let (profiles, problems) = auto_tuner::list_profiles(hw, opt);
    for problem in problems {
        say(format_args!("sipllm: warning: {problem}"));
    }
    profiles
}

/// One row of `sipllm profile list --json`.
fn list_json(p: &StoredProfile) -> serde_json::Value {
    let r = p.profile.as_ref();
    serde_json::json!({
        "store": p.store.name(),
        "id": p.id,
        "path": p.path.display().to_string(),
        "hardware_id": r.map(|r| r.hardware_id.clone()),
        "workload": r.map(|r| r.request.workload.name.clone()),
        "workload_key": r.map(|r| r.request.workload.key()),
        "batch": r.map(|r| r.request.batch),
        "rigor": r.map(|r| r.rigor),
        "thread_limit": r.map(|r| r.request.thread_limit),
        "tuned_at": r.and_then(|r| r.tuned_at.clone()),
        "crate_version": r.map(|r| r.crate_version.clone()),
        "kernel": r.map(|r| r.kernel.clone()),
        "partial": r.map(|r| r.partial),
        "valid": p.valid.is_ok(),
        "why_not": p.valid.as_ref().err(),
        "symbolic_link": p.link,
    })
}

fn show(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    id: Option<&str>,
    json: bool,
) -> Result<Output, TunerError> {
    let wanted = id.map_or_else(|| hw.hardware_id(), str::to_string);
    let profiles = listed(hw, opt);
    // The user's cache comes first in the list, as in the lookup.
    let Some(found) = profiles.into_iter().find(|p| p.id == wanted) else {
        let store = user_store(opt).map_or_else(|| "(none)".to_string(), |d| shown_path(&d));
        // A store that cannot be used was named above, as a warning.
        let saves = user_store(opt)
            .is_some_and(|dir| auto_tuner::ProfileCache::in_dir(&dir).unusable().is_none());
        let message = if id.is_none() {
            // This machine's own id, which the user did not type: nothing is cached yet.
            format!(
                "no profile of this machine ({}) for the default model is cached; `sipllm` \
                 tunes it{}, and `sipllm profile list` shows the profiles there are (`sipllm \
                 profile show ID` shows one)",
                shown(&wanted),
                if saves {
                    ""
                } else {
                    " but cannot save it without a usable store (see the warning)"
                }
            )
        } else {
            format!(
                "no profile {} is cached, here or in the system store; `sipllm profile list` \
                 shows the profiles there are",
                shown(&wanted)
            )
        };
        return Err(TunerError::Store {
            path: store,
            message,
        });
    };
    let Some(profile) = &found.profile else {
        let why = found.valid.err().unwrap_or_default();
        return Err(TunerError::Store {
            path: auto_tuner::shown_path(&found.path),
            message: format!("not a readable profile: {why}"),
        });
    };
    if json {
        let text = serde_json::to_string_pretty(profile).map_err(|e| TunerError::Store {
            path: auto_tuner::shown_path(&found.path),
            message: e.to_string(),
        })?;
        return Ok(Output::Stdout(format!("{text}\n")));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "profile:     {} ({} store)",
        shown(&found.id),
        found.store.name()
    );
    let _ = writeln!(s, "path:        {}", shown_path(&found.path));
    let _ = match &found.valid {
        Ok(()) => writeln!(
            s,
            "status:      valid on this machine{}",
            serves(found.profile.as_ref())
        ),
        Err(why) => writeln!(s, "status:      not used here: {why}"),
    };
    let _ = writeln!(
        s,
        "request:     workload key {}, at most {} threads{}",
        profile.request.workload.key(),
        profile.request.thread_limit,
        profile
            .request
            .budget_seconds
            .map_or_else(String::new, |b| format!(", budget {b} s"))
    );
    s.push_str(&answer_lines(profile));
    let _ = writeln!(
        s,
        "tuned:       {} by sipllm {} with kernel {}",
        shown(profile.tuned_at.as_deref().unwrap_or("-")),
        shown(&profile.crate_version),
        shown(&profile.kernel)
    );
    if !profile.decode.measurements.is_empty() || !profile.prefill.measurements.is_empty() {
        s.push('\n');
        s.push_str(&measurement_table(profile));
    }
    Ok(Output::Stdout(s))
}

fn clear(hw: &HardwareInfo, opt: &AutoTunerOptions, all: bool) -> Result<Output, TunerError> {
    let removed = auto_tuner::clear_profiles(hw, opt, all)?;
    let mut s = format!(
        "removed {} profile{}\n",
        removed.len(),
        if removed.len() == 1 { "" } else { "s" }
    );
    for path in removed {
        let _ = writeln!(s, "  {}", shown_path(&path));
    }
    Ok(Output::Done {
        report: s,
        done: "the profiles were removed",
    })
}

fn export(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    output: Option<&Path>,
) -> Result<Output, TunerError> {
    let output = output.filter(|p| *p != Path::new("-"));
    let unwritable = |path: &Path, e: std::io::Error| TunerError::Write {
        path: shown_path(path),
        message: e.to_string(),
    };
    // A destination that would be refused is refused before the store is read.
    if let Some(path) = output {
        check_output(path, &Guarded::of(None, None, opt)).map_err(|e| unwritable(path, e))?;
    }
    let (bundle, warnings) = auto_tuner::export_profiles(hw, opt)?;
    for warning in &warnings {
        say(format_args!("sipllm: warning: {warning}"));
    }
    let store = || user_store(opt).map_or_else(|| "(none)".to_string(), |d| shown_path(&d));
    if bundle.profiles.is_empty() {
        return Err(TunerError::Store {
            path: store(),
            message: "no valid profile of this machine to export (tune first: sipllm)".to_string(),
        });
    }
    let mut text = serde_json::to_string_pretty(&bundle).map_err(|e| TunerError::Store {
        path: store(),
        message: format!("cannot write the bundle: {e}"),
    })?;
    text.push('\n');
    let Some(path) = output else {
        return Ok(Output::Stdout(text));
    };
    write_whole(path, text.as_bytes()).map_err(|e| unwritable(path, e))?;
    say(format_args!(
        "sipllm: exported {} profile{} to {}",
        bundle.profiles.len(),
        if bundle.profiles.len() == 1 { "" } else { "s" },
        shown_path(path)
    ));
    Ok(Output::Written)
}

fn import(
    hw: &HardwareInfo,
    opt: &AutoTunerOptions,
    file: &Path,
    force: bool,
) -> Result<Output, Stop> {
    let unreadable = |e: std::io::Error| {
        TunerError::Import(format!("cannot read {}: {e}", auto_tuner::shown_path(file)))
    };
    let mut text = Vec::new();
    let limit = MAX_BUNDLE_BYTES + 1;
    if file == Path::new("-") {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut text)
            .map_err(unreadable)?;
    } else {
        // Opened without blocking (a FIFO must not hang the command), then checked; a file
        // above the limit is read one byte past it, which the import refuses by its size.
        let (f, _) = regular_file::open(file, u64::MAX).map_err(|e| match e {
            regular_file::Error::NotAFile(_) | regular_file::Error::SymbolicLink(_) => {
                TunerError::Import(format!(
                    "{} is not a regular file (use - to read the bundle from stdin)",
                    auto_tuner::shown_path(file)
                ))
            }
            regular_file::Error::Io { source, .. } => unreadable(source),
            regular_file::Error::NotFound(_) => TunerError::Import(format!(
                "cannot read {}: no such file",
                auto_tuner::shown_path(file)
            )),
            other => TunerError::Import(other.to_string()),
        })?;
        f.take(limit).read_to_end(&mut text).map_err(unreadable)?;
    }
    let written = auto_tuner::import_profiles(hw, opt, &text, force).map_err(|e| match e {
        // The one refusal `--force` answers says so.
        TunerError::ImportFromChangedMachine { .. } => Stop::Failed(format!(
            "{e}; if it is the same machine, `sipllm profile import --force` takes the \
             profiles as this machine's"
        )),
        other => Stop::from(other),
    })?;
    let auto_tuner::Imported { written, replaced } = written;
    let mut s = format!(
        "imported {} profile{}{}\n",
        written.len(),
        if written.len() == 1 { "" } else { "s" },
        match replaced.len() {
            0 => String::new(),
            n => format!(" ({n} replaced a cached one)"),
        }
    );
    for path in written {
        let mark = if replaced.contains(&path) {
            " (replaced)"
        } else {
            ""
        };
        let _ = writeln!(s, "  {}{mark}", shown_path(&path));
    }
    Ok(Output::Done {
        report: s,
        done: "the profiles were imported",
    })
}

/// What a valid profile serves when that is less than every run: a partial one only runs
/// whose budget is no larger (or that never measure), a noisy one (not itself a re-tune)
/// only until a run that may measure re-tunes it once. Empty otherwise.
fn serves(profile: Option<&auto_tuner::RuntimeProfile>) -> String {
    let Some(profile) = profile else {
        return String::new();
    };
    let retuned = profile
        .environment
        .as_ref()
        .is_some_and(|e| e.wants_retune());
    match (profile.partial, retuned) {
        (true, _) => format!(
            " (partial: for runs with --budget {} s or less, and --cached-only)",
            profile.request.budget_seconds.unwrap_or(0.0)
        ),
        (false, true) => {
            " (measured under load: the next run that may measure re-tunes it once)".to_string()
        }
        (false, false) => String::new(),
    }
}
