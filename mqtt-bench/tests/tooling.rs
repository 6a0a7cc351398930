//! `mqtt-bench compare` and `mqtt-bench report` on two real runs of the binary with no subcommand
//! (the embedded broker, three short rounds each), the report of a real run rendered in chromium,
//! and what `k8s-manifest` refuses.
//! The book's reference page of `mqtt-bench` is checked against its `--help` here too.

use common::testing::tooling::Tool;

#[test]
fn two_real_runs_compare_and_one_reports_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    Tool {
        bin: env!("CARGO_BIN_EXE_mqtt-bench"),
        quick: "--scenarios qos1,qos0 --duration 300ms --sweep 2k,5k --latency-rate 1k \
                --subscribers 4 --ceiling 30s",
        ..Tool::default()
    }
    .assert_two_runs(dir.path());
}

/// A manifest for the default scenarios (one topic each) or an unnamed broker, whose pods would
/// all exit 2, is refused with the run's own line; one of the scenarios that split is printed.
#[test]
fn k8s_manifest_refuses_what_worker_mode_cannot_split_with_the_runs_own_line() {
    let manifest = |args: &[&str]| {
        common::testing::tooling::manifest("mqtt-bench", &mqtt_bench::TOOLING, args)
    };
    let broker = ["--broker", "mosquitto=mqtt://broker.example:1883"];
    let error = format!("{:#}", manifest(&broker).unwrap_err());
    assert!(
        error
            .contains("scenario has one topic, whose publisher and subscribers stay on one worker"),
        "{error}"
    );
    let split = ["--scenarios", "connect,idle,many-to-many"];
    let unnamed = ["--broker", "mqtt://broker.example:1883", split[0], split[1]];
    let error = format!("{:#}", manifest(&unnamed).unwrap_err());
    assert!(
        error.contains("name every broker (--broker NAME=URL)"),
        "{error}"
    );
    assert!(manifest(&[&broker[..], &split[..]].concat()).is_ok());
}

/// The book's reference page (docs/src/reference/mqtt-bench.md) is what `mqtt-bench --help` and each
/// subcommand's `--help` print now.
#[test]
fn the_reference_page_is_the_help() {
    common::reference::assert_page(
        common::cli::tool_command::<mqtt_bench::Opts>(mqtt_bench::EXAMPLES),
        env!("CARGO_MANIFEST_DIR"),
    );
}
