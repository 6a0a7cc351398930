//! The exit codes of every fairbench command, named once (DESIGN: 0 all cells ok, 1 the run
//! finished but some cell is not ok, 2 bad input or nothing could be measured).

use std::process::ExitCode;

use crate::results::{Report, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Every cell is `ok`.
    AllOk = 0,
    /// The run finished, but some cell is not `ok` (invalid, timeout, error, refused, …).
    NotAllOk = 1,
    /// Bad input, or nothing could be measured: one line on stderr says why.
    BadInput = 2,
}

impl Exit {
    /// What a finished report exits with.
    pub fn of(report: &Report) -> Exit {
        if report.cells.iter().all(|c| c.status == Status::Ok) {
            Exit::AllOk
        } else {
            Exit::NotAllOk
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_the_documented_ones() {
        assert_eq!(
            [Exit::AllOk, Exit::NotAllOk, Exit::BadInput].map(Exit::code),
            [0, 1, 2]
        );
    }
}
