//! One file per subcommand; [`resolve_args`] turns a run's flags into a spec
//! for all of them.

pub(crate) mod explain;
pub(crate) mod job;
pub(crate) mod mcp;
pub(crate) mod parse_status;
pub(crate) mod prune;
pub(crate) mod run;
pub(crate) mod supervise;
pub(crate) mod transaction;

use std::process::ExitCode;

use dsh_exec_core::error::PathProblem;
use dsh_exec_core::{Ambient, Error, Spec, resolve};

use crate::cli::{ColorChoice, RunArgs};
use crate::output::{infrastructure_error, terminal_colours, usage_error};

/// The spec of a run's flags (with the configuration file), whether to
/// print JSON, and the colour choice; or the exit status of a usage or
/// configuration error, already reported.
pub(crate) fn resolve_args(args: RunArgs) -> Result<(Spec, bool, ColorChoice), ExitCode> {
    resolve_args_reading(args, true)
}

/// As [`resolve_args`]; `read_secrets` false leaves the credentials'
/// sources unread (`explain`: an `fd:` source can be read once, and a
/// missing one is what `explain` may be asked to show).
pub(crate) fn resolve_args_reading(
    args: RunArgs,
    read_secrets: bool,
) -> Result<(Spec, bool, ColorChoice), ExitCode> {
    let (json, color) = (args.json, args.color);
    let ambient = match Ambient::current(args.workdir.as_deref()) {
        Ok(a) => a,
        Err(e) => {
            let err = Error::WorkdirUnusable {
                path: ".".into(),
                problem: PathProblem::Io(std::io::Error::new(
                    e.kind(),
                    format!("current directory: {e}"),
                )),
            };
            return Err(infrastructure_error(&err, json));
        }
    };
    let mut request = args.into_request().map_err(|e| usage_error(&e))?;
    request.terminal_colours = Some(terminal_colours(color));
    if !read_secrets {
        request.secrets = Some(Default::default());
    }
    request.config = match dsh_exec_core::request::config::load(&ambient.env) {
        Ok(c) => c,
        Err(e) => return Err(infrastructure_error(&e, json)),
    };
    match resolve(request, &ambient) {
        Ok(spec) => {
            // The spec holds every value the child gets: the scrubbed ones
            // leave this process's own environment block now.
            let _ = dsh_exec_core::wipe_scrubbed_environ(&spec.env.scrubbed);
            Ok((spec, json, color))
        }
        Err(e) => Err(usage_error(&e.0)),
    }
}
