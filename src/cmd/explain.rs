//! `dsh-exec explain [OPTIONS] -- COMMAND`: the resolved spec, environment
//! and sandbox policy; runs nothing.

use std::process::ExitCode;

use dsh_exec_core::render::{explain_json, explain_text};

use super::resolve_args_reading;
use crate::cli::RunArgs;
use crate::output::{print_stdout, to_json, use_color};

/// Prints the explanation of `args`, as text or JSON.
pub(crate) fn explain(args: RunArgs) -> ExitCode {
    // The credentials' values are not read: explain shows their sources.
    let (spec, json, color) = match resolve_args_reading(args, false) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if json {
        print_stdout(&to_json(&explain_json(&spec)));
    } else {
        print_stdout(&explain_text(&spec, use_color(color)));
    }
    ExitCode::SUCCESS
}
