//! `dsh-exec prune --spill`: removing old spill directories of foreground
//! runs, which outlive their runs by design.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use dsh_exec_core::error::PathProblem;
use dsh_exec_core::request::default_spill_parent;
use dsh_exec_core::{Ambient, Error, prune_spill_dirs};

use crate::output::{infrastructure_error, print_stdout, usage_error};

/// Prunes the spill directories in `spill_dir`, else in the configuration
/// file's `spill_dir`, `STATE/spill` and the temp dir (where runs spill),
/// that nothing changed for `older_than`; prints how many and how many
/// bytes. A configured directory that does not exist is skipped.
pub(crate) fn prune(spill: bool, older_than: Duration, spill_dir: Option<PathBuf>) -> ExitCode {
    if !spill {
        return usage_error("prune needs --spill (spill directories are what it removes)");
    }
    let parents = match spill_dir {
        Some(dir) => vec![dir],
        None => match Ambient::current(None) {
            Ok(ambient) => {
                // Where runs spill: the configuration file's `spill_dir`
                // (relative to here, as a run takes it), then the built-in
                // places.
                let configured = match dsh_exec_core::request::config::load(&ambient.env) {
                    Ok(config) => config.and_then(|c| c.defaults.spill_dir),
                    Err(e) => return infrastructure_error(&e, false),
                };
                let mut parents: Vec<PathBuf> = configured
                    .map(|p| ambient.cwd.join(p))
                    .into_iter()
                    .collect();
                for place in [default_spill_parent(&ambient), ambient.temp_dir.clone()] {
                    if !parents.contains(&place) {
                        parents.push(place);
                    }
                }
                parents
            }
            Err(e) => {
                let err = Error::WorkdirUnusable {
                    path: ".".into(),
                    problem: PathProblem::Io(e),
                };
                return infrastructure_error(&err, false);
            }
        },
    };
    let (mut dirs, mut bytes) = (0, 0);
    for parent in &parents {
        match prune_spill_dirs(parent, older_than) {
            Ok(p) => {
                dirs += p.dirs;
                bytes += p.bytes;
            }
            Err(e) => return infrastructure_error(&e, false),
        }
    }
    let noun = if dirs == 1 {
        "directory"
    } else {
        "directories"
    };
    print_stdout(&format!("pruned {dirs} spill {noun} ({bytes} bytes)\n"));
    ExitCode::SUCCESS
}

/// The configuration file's `prune_spill_after`: at the start of a run or
/// a job, the spill directories of this user unchanged for that long, in
/// the run's spill parent and the temp dir, are removed. Failures are
/// ignored: pruning is housekeeping, not the run.
pub(crate) fn auto_prune(spec: &dsh_exec_core::Spec) {
    let Some(age) = spec.prune_spill_after else {
        return;
    };
    let mut parents: Vec<&std::path::Path> = vec![&spec.spill_dir.value];
    if let Some(fallback) = &spec.spill_fallback {
        parents.push(fallback);
    }
    parents.dedup();
    for parent in parents {
        let _ = prune_spill_dirs(parent, age);
    }
}
