//! The command line itself: shared options before or after the subcommand, suggestions for
//! typos, shell completions, man pages, `journal show --index`, and the exit status of
//! "nothing found". The built binary runs as a process, against SQLite journals prepared through
//! the library and the sandbox in-process over HTTPS on loopback.

mod support;

use std::path::Path;
use std::process::Command;

use slotpartner::journal::Begin;

use support::*;

fn payout_body(transaction_id: i64, index: i64, money: i64) -> String {
    format!(
        r#"{{"event":"jackpotPayout","jackpotIdentifier":"jp-1","playerIdentifier":"player-1","currencyISO4217":"EUR","moneyWon":{money},"coinsWon":0,"isMoney":true,"epochReleasedMillis":1718064000000,"isPrimary":true,"transactionId":{transaction_id},"buyTransactionId":{},"partnerGameRequestIdentifier":"req-{transaction_id}","gameSessionId":5,"gameId":1002,"index":{index}}}"#,
        transaction_id + 1_000_000
    )
}

/// A journal with: 1 a refund done (900001), 2 a payout done (900002), 3 an event without a
/// transactionId done, 5 a payout refused by validation (900005), 4 missing.
fn prepared_journal(scratch: &Scratch) -> String {
    let url = scratch.journal_url();
    let journal = open_journal(&url);
    for (body, reply) in [
        (refund_body(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#.to_owned()),
        (payout_body(900_002, 2, 150_000), r#"{"payout":{"success":true,"errorMessage":""}}"#.to_owned()),
        (r#"{"event":"bonusGranted","bonus":7,"index":3}"#.to_owned(), r#"{"success":true}"#.to_owned()),
    ] {
        let Begin::New(claim) = journal.begin(&delivery(&body)).unwrap() else { panic!("new") };
        journal.finish(&claim, reply.as_bytes()).unwrap();
    }
    journal.record_refused(5, Some("jackpotPayout"), Some(900_005)).unwrap();
    url
}

// ---------------------------------------------------------------------------------------------
// Shared options

#[test]
fn journal_options_before_or_after_the_subcommand() {
    let scratch = Scratch::new("global-journal");
    let url = prepared_journal(&scratch);
    // The counts and indexes (the size and ages move as the journal is read).
    let figures = |args: &[&str]| {
        let mut json = run(args).expect(1).json();
        let object = json.as_object_mut().unwrap();
        object.retain(|name, _| !name.starts_with("size") && !name.ends_with("age_seconds"));
        json
    };
    let after = figures(&["journal", "status", "--json", "--journal", &url]);
    assert_eq!((after["handled"].as_u64(), after["missing"].as_u64()), (Some(3), Some(1)), "{after}");
    for args in [
        &["--journal", url.as_str(), "journal", "status", "--json"][..],
        &["journal", "--journal", url.as_str(), "status", "--json"],
        &["--journal=sqlite:/nonexistent.db", "journal", "status", "--journal", url.as_str(), "--json"],
    ] {
        assert_eq!(figures(args), after, "{args:?}");
    }
    // Given before the subcommand, the option still wins over the variable.
    let env = [("SLOTPARTNER_JOURNAL", "mysql://db/x")];
    let before = run_with(&["--journal", &url, "journal", "gaps"], &env, None).expect(1);
    assert_eq!(before.stdout, "4\n");
    // Its value is checked wherever it stands.
    let line = run(&["--max-index-jump", "0", "journal", "status"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--max-index-jump"), "{line}");
    let line = run(&["--journal", "mysql://db/x", "journal", "show", "900001"]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with(r#"slotpartner: journal_url: scheme "mysql" is not a journal"#), "{line}");
    // A command that does not read the journal ignores the option, as it ignores the variable.
    let body = scratch.write("body.json", refund_body(900_001, 1).as_bytes());
    let out = run(&["--journal", &url, "inspect", path_str(&body), "--journal", &url]).expect(0);
    assert!(out.stdout.contains("gameSessionBuyRefund"), "{}", out.stdout);
}

#[test]
fn service_options_before_or_after_the_subcommand() {
    let scratch = Scratch::new("global-service");
    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    let service_args = ["--base-url", base.as_str(), "--token", TOKEN, "--ca-file", path_str(&ca)];
    let mut before = service_args.to_vec();
    before.extend(["games", "en-US", "1003", "--json"]);
    let mut after = vec!["games", "en-US", "1003", "--json"];
    after.extend(service_args);
    let mut between = vec!["games", "--base-url", base.as_str(), "en-US"];
    between.extend(["--token", TOKEN, "1003", "--ca-file", path_str(&ca), "--json"]);
    let want = run(&after).expect(0).json();
    assert_eq!(want[0]["gameId"], 1003, "{want}");
    assert_eq!(run(&before).expect(0).json(), want);
    assert_eq!(run(&between).expect(0).json(), want);
    // A shared option's check names it, before the subcommand too.
    let line = run(&["--retries", "11", "games", "en-US"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--retries"), "{line}");
}

#[test]
fn each_subcommand_lists_the_shared_options_it_uses() {
    for (args, listed, not_listed) in [
        (
            &["journal", "status"][..],
            &["--journal", "--max-index-jump", "SLOTPARTNER_JOURNAL"][..],
            &["--base-url"][..],
        ),
        (&["journal", "show"], &["--journal", "--index"], &["--token", "--callback-url"]),
        (&["games"], &["--base-url", "--token", "--ca-file", "--timeout", "SLOTPARTNER_TOKEN"], &["--journal"]),
        (
            &["recover"],
            &[
                "--journal",
                "--base-url",
                "--token",
                "--callback-url",
                "--callback-ca-file",
                "--index-field",
                "--min-age",
            ],
            &[],
        ),
        (&["inspect"], &["--index-field", "--strict-index"], &["--journal", "--base-url"]),
        (&["metrics"], &["--journal"], &["--base-url"]),
    ] {
        let mut with_help = args.to_vec();
        with_help.push("--help");
        let help = run(&with_help).expect(0).stdout;
        for option in listed {
            assert!(help.contains(option), "{option} in {args:?} --help:\n{help}");
        }
        for option in not_listed {
            assert!(!help.contains(option), "no {option} in {args:?} --help:\n{help}");
        }
    }
    // The top level lists every shared option and says where they may stand.
    let help = run(&["--help"]).expect(0).stdout;
    for option in ["--journal", "--base-url", "--token", "--ca-file", "--callback-url", "--index-field"] {
        assert!(help.contains(option), "{option} in --help:\n{help}");
    }
    assert!(help.contains("before or after the"), "{help}");
}

// ---------------------------------------------------------------------------------------------
// Suggestions

#[test]
fn typos_get_a_suggestion_and_exit_2() {
    let line = run(&["jornal", "status"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("'jornal'") && line.contains("a similar subcommand exists: 'journal'"), "{line}");
    assert!(line.ends_with("see 'slotpartner --help')"), "{line}");
    let line = run(&["journal", "status", "--jsn"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("'--jsn'") && line.contains("a similar argument exists: '--json'"), "{line}");
    assert!(line.ends_with("see 'slotpartner journal status --help')"), "{line}");
    // The pointer to the help names the subcommand after shared options too.
    let line = run(&["--journal", "sqlite:x.db", "journal", "--token", "t", "status", "--jsn"])
        .expect(2)
        .one_error_line()
        .to_owned();
    assert!(line.ends_with("(a similar argument exists: '--json'; see 'slotpartner journal status --help')"), "{line}");
    let line = run(&["--jornal", "x", "journal", "status"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("a similar argument exists: '--journal'"), "{line}");
    let line = run(&["journal", "stauts"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("a similar subcommand exists: 'status'"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Completions

/// Runs `shell args... file`; `None` when the shell is not installed.
fn syntax_check(shell: &str, args: &[&str], file: &Path) -> Option<std::process::Output> {
    match Command::new(shell).args(args).arg(file).output() {
        Ok(output) => Some(output),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("{shell}: {e}"),
    }
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let scratch = Scratch::new("completions");
    for (shell, checker, args, option) in [
        ("bash", "bash", &["-n"][..], "--journal"),
        ("zsh", "zsh", &["-n"], "--journal"),
        ("fish", "fish", &["--no-execute"], "-l journal"),
    ] {
        let out = run(&["completions", shell]).expect(0);
        assert!(out.stderr.is_empty(), "{shell}: {}", out.stderr);
        for word in ["journal", "status", "recover", "games", "completions", option] {
            assert!(out.stdout.contains(word), "{shell}: {word} in the script");
        }
        let file = scratch.write(&format!("slotpartner.{shell}"), out.stdout.as_bytes());
        match syntax_check(checker, args, &file) {
            Some(output) => assert!(
                output.status.success(),
                "{checker} {args:?} refuses the script: {}",
                String::from_utf8_lossy(&output.stderr)
            ),
            None => println!("SKIP: {checker} is not installed; the {shell} script's syntax is not checked"),
        }
    }
    let line = run(&["completions", "tcsh"]).expect(2).one_error_line().to_owned();
    assert!(line.contains("'tcsh'") && line.contains("bash"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Man pages

#[test]
fn man_pages_for_the_command_and_each_subcommand() {
    let scratch = Scratch::new("man");
    let dir = scratch.path("man/man1");
    let out = run(&["man", "--out", path_str(&dir)]).expect(0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    for (page, title, options) in [
        ("slotpartner.1", "slotpartner", &[r"\-\-journal", r"\-\-base\-url", "SUBCOMMANDS"][..]),
        ("slotpartner-journal-status.1", "slotpartner-journal-status", &[r"\-\-journal", r"\-\-prometheus"]),
        ("slotpartner-journal-show.1", "slotpartner-journal-show", &[r"\-\-index", "TRANSACTION_ID"]),
        ("slotpartner-recover.1", "slotpartner-recover", &[r"\-\-callback\-url", r"\-\-min\-age"]),
        ("slotpartner-games.1", "slotpartner-games", &[r"\-\-token", "Exit status"]),
        ("slotpartner-completions.1", "slotpartner-completions", &["SHELL"]),
    ] {
        assert!(names.iter().any(|n| n == page), "{page} in {names:?}");
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        // The first request, after the string definitions of the preamble, is the title.
        let first = text.lines().find(|l| !l.starts_with(".ie") && !l.starts_with(".el")).unwrap();
        assert!(first.starts_with(&format!(".TH {title} 1 ")), "{page}: {first}");
        for option in options {
            assert!(text.contains(option), "{option} in {page}");
        }
    }
    // Every subcommand has its page; the hidden `man` has none.
    assert!(names.len() >= 20 && !names.iter().any(|n| n == "slotpartner-man.1"), "{names:?}");
    // A man reader reads them, when one is installed.
    match Command::new("man").args(["-l", "-P", "cat"]).arg(dir.join("slotpartner-journal-show.1")).output() {
        Ok(output) => {
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
            let shown = String::from_utf8_lossy(&output.stdout);
            assert!(shown.contains("NAME") && shown.contains("transactionId"), "{shown}");
        }
        Err(_) => println!("SKIP: no man reader installed; the pages are not rendered"),
    }
    // Where no directory can be made: exit 2 naming the option.
    let file = scratch.write("a-file", b"x");
    let line = run(&["man", "--out", path_str(&file.join("sub"))]).expect(2).one_error_line().to_owned();
    assert!(line.starts_with("slotpartner: --out: "), "{line}");
}

// ---------------------------------------------------------------------------------------------
// journal show --index, and "nothing found"

#[test]
fn journal_show_by_index() {
    let scratch = Scratch::new("show-index");
    let url = prepared_journal(&scratch);
    let out = run(&["journal", "show", "--index", "2", "--journal", &url]).expect(0);
    for line in [
        "key:            jackpotPayout:900002",
        "index:          2",
        "transactionId:  900002",
        "state:          done",
        r#"reply:          {"payout":{"success":true,"errorMessage":""}}"#,
    ] {
        assert!(out.stdout.lines().any(|l| l == line), "{line:?} in\n{}", out.stdout);
    }
    // The same records as by its transactionId.
    let by_index = run(&["journal", "show", "--index", "1", "--json", "--journal", &url]).expect(0).json();
    let by_id = run(&["journal", "show", "900001", "--json", "--journal", &url]).expect(0).json();
    assert_eq!(by_index, by_id);
    // An event without a transactionId: its key, event, index and state.
    let json = run(&["journal", "show", "--index", "3", "--json", "--journal", &url]).expect(0).json();
    assert_eq!(json.as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json[0]["key"], "event#3#bonusGranted");
    assert_eq!((json[0]["event"].as_str(), json[0]["state"].as_str()), (Some("bonusGranted"), Some("done")));
    assert!(json[0]["transaction_id"].is_null() && json[0]["created"].is_null(), "{json}");

    // One of the two, and an index is a non-negative integer.
    let line =
        run(&["journal", "show", "900001", "--index", "1", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--index"), "{line}");
    let line = run(&["journal", "show", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("TRANSACTION_ID"), "{line}");
    let line = run(&["journal", "show", "--index", "-1", "--journal", &url]).expect(2).one_error_line().to_owned();
    assert!(line.contains("--index"), "{line}");
}

#[test]
fn nothing_found_exits_1() {
    let scratch = Scratch::new("nothing-found");
    let url = prepared_journal(&scratch);
    let out = run(&["journal", "show", "--index", "4", "--journal", &url]).expect(1);
    assert!(out.stdout.is_empty());
    assert_eq!(out.stderr, "slotpartner: the journal holds no record of index 4\n");
    let json = run(&["journal", "show", "--index", "4", "--json", "--journal", &url]).expect(1).json();
    assert_eq!(json, serde_json::json!([]));
    let out = run(&["journal", "show", "123", "--journal", &url]).expect(1);
    assert_eq!(out.stderr, "slotpartner: the journal holds no record of transactionId 123\n");

    let service = sandbox(1, 1);
    let ca = ca_file(&scratch, &service);
    let base = service.base_url();
    let env =
        [("SLOTPARTNER_BASE_URL", base.as_str()), ("SLOTPARTNER_TOKEN", TOKEN), ("SLOTPARTNER_CA_FILE", path_str(&ca))];
    let out = run_with(&["games", "fr-FR", "9999"], &env, None).expect(1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(out.stderr, "slotpartner: the service lists no game 9999 in fr-FR\n");
    let json = run_with(&["games", "fr-FR", "9999", "--json"], &env, None).expect(1).json();
    assert_eq!(json, serde_json::json!([]));
    // A game that exists: found, 0.
    run_with(&["games", "fr-FR", "1001"], &env, None).expect(0);
}

/// A library failure reaches the operator with advice in the command's terms: `games` against
/// a service whose CA is not given names `--ca-file`, never the library's settings.
#[test]
fn a_service_certificate_not_trusted_names_the_command_option() {
    let service = sandbox(1, 1);
    let base = service.base_url();
    let line =
        run(&["games", "en-US", "--base-url", base.as_str(), "--token", TOKEN]).expect(2).one_error_line().to_owned();
    assert!(line.contains("UnknownIssuer") && line.contains("--ca-file PEM (or SLOTPARTNER_CA_FILE)"), "{line}");
    assert!(!line.contains("ca_pem") && !line.contains("sp_client"), "{line}");
}

/// A shared option given to a subcommand that does not use it is ignored with a note, wherever
/// it stands on the line; one the subcommand uses, or a variable, gets none.
#[test]
fn a_shared_option_a_subcommand_does_not_use_gets_a_note() {
    let scratch = Scratch::new("ignored-note");
    let url = prepared_journal(&scratch);
    let note = "slotpartner: note: `journal gaps` does not use --min-age: ignored";
    let after = run(&["journal", "gaps", "--journal", &url, "--min-age", "30d"]);
    let before = run(&["--min-age", "30d", "--journal", &url, "journal", "gaps"]);
    let plain = run(&["journal", "gaps", "--journal", &url]);
    for out in [&after, &before] {
        assert!(out.stderr.contains(note), "{}", out.stderr);
        assert_eq!((out.code, &out.stdout), (plain.code, &plain.stdout), "the note changes nothing else");
    }
    assert!(!plain.stderr.contains("note:"), "{}", plain.stderr);
    let by_variable = run_with(&["journal", "gaps", "--journal", &url], &[("SLOTPARTNER_MIN_AGE", "30d")], None);
    assert!(!by_variable.stderr.contains("note:"), "{}", by_variable.stderr);
    let used = run(&["journal", "gaps", "--journal", &url, "--older-than", "1s"]);
    assert!(!used.stderr.contains("note:"), "{}", used.stderr);
}
