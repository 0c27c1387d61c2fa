use super::*;

const GOOD: &str = r#"[task]
name = "softmax"
summary = "Row-wise softmax"
entry = "softmax"
baseline = "baseline.cu"

[[arg]]
name = "x"
type = "const float*"
len = "rows * cols"
init = "normal(0, 1)"

[[arg]]
name = "y"
type = "float*"
len = "rows * cols"
output = true

[[arg]]
name = "rows"
type = "int"

[[arg]]
name = "cols"
type = "int"

[sizes]
bench = { rows = 8192, cols = 4096 }
check = [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]

[check]
rtol = 1e-5
atol = 1e-6
seeds = 2

[roofline]
bytes = "8 * rows * cols"
flops = "5 * rows * cols"

[tune]
BLOCK = [128, 256]
"#;

fn dir_with_baseline() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baseline.cu"), "// kernel\n").unwrap();
    dir
}

fn load(text: &str) -> Result<Task, TaskError> {
    let dir = dir_with_baseline();
    Task::from_text(dir.path(), &dir.path().join("task.toml"), text)
}

fn error(text: &str) -> TaskError {
    load(text).expect_err("the task should be rejected")
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).expect("needle in text") + 1
}

#[test]
fn a_good_task_resolves_every_field() {
    let t = load(GOOD).unwrap();
    assert_eq!(t.name, "softmax");
    assert_eq!(t.entry, "softmax");
    assert_eq!(t.args.len(), 4);
    assert!(matches!(t.args[0].role, ArgRole::Input { .. }));
    assert!(matches!(t.args[1].role, ArgRole::Output { tolerance: Tolerance { rtol, .. }, .. } if rtol == 1e-5));
    assert_eq!(t.args[2].role, ArgRole::Scalar { value: ScalarValue::Int("rows".into()) });
    assert_eq!(t.checks.len(), 2);
    assert_eq!(t.bench.vars["cols"], 4096);
    assert_eq!(t.seeds, 2);
    assert!(t.deterministic);
    assert!(!t.has_reference());
    assert_eq!(t.reference, t.baseline);
    let w = t.work(&t.bench).unwrap();
    assert_eq!(w.bytes, 8.0 * 8192.0 * 4096.0);
    assert_eq!(w.flops, 5.0 * 8192.0 * 4096.0);
    assert_eq!(t.tune["BLOCK"], vec!["128".to_string(), "256".to_string()]);
    assert_eq!(t.smallest_check().vars["rows"], 1);
    assert_eq!(t.total_bytes(&t.checks[1]), 2 * 67 * 4099 * 4);
}

#[test]
fn syntax_errors_carry_the_line() {
    let text = GOOD.replace("seeds = 2", "seeds = = 2");
    let e = error(&text);
    assert_eq!(e.line, Some(line_of(&text, "seeds = =")), "{e}");
}

#[test]
fn unknown_fields_are_rejected_where_they_are() {
    let text = GOOD.replace("output = true", "outptu = true");
    let e = error(&text);
    assert_eq!(e.line, Some(line_of(&text, "outptu")), "{e}");
    assert!(e.message.contains("outptu"), "{e}");
}

#[test]
fn bad_length_expression_names_field_line_and_expectation() {
    let text = GOOD.replacen("len = \"rows * cols\"", "len = \"rows * colz\"", 1);
    let e = error(&text);
    assert_eq!(e.field, "arg[0] (x).len");
    assert_eq!(e.line, Some(line_of(&text, "colz")));
    assert!(e.message.contains("`colz`, which is not a size variable (cols, rows)"), "{e}");
    let shown = e.to_string();
    assert!(shown.contains("task.toml:"), "{shown}");
}

#[test]
fn unparsable_expression_points_at_the_character() {
    let text = GOOD.replace("bytes = \"8 * rows * cols\"", "bytes = \"8 * (rows * cols\"");
    let e = error(&text);
    assert_eq!(e.field, "roofline.bytes");
    assert!(e.message.contains("missing `)`"), "{e}");
}

#[test]
fn unknown_type_lists_the_known_ones() {
    let text = GOOD.replace("type = \"const float*\"", "type = \"const float4*\"");
    let e = error(&text);
    assert_eq!(e.field, "arg[0] (x).type");
    assert!(e.message.contains("unknown type `float4`"), "{e}");
    assert!(e.message.contains("__nv_bfloat16"), "{e}");
}

#[test]
fn missing_baseline_file() {
    let text = GOOD.replace("baseline.cu", "nope.cu");
    let e = error(&text);
    assert_eq!(e.field, "task.baseline");
    assert_eq!(e.line, Some(line_of(&text, "nope.cu")));
    assert!(e.message.contains("`nope.cu` does not exist"), "{e}");
}

#[test]
fn missing_required_field() {
    let text = GOOD.replace("entry = \"softmax\"\n", "");
    let e = error(&text);
    assert_eq!(e.field, "task.entry");
    assert!(e.message.contains("missing; expected a string (the name of the extern \"C\" launcher)"), "{e}");
}

#[test]
fn inputs_need_an_init_and_outputs_cannot_be_const() {
    let e = error(&GOOD.replace("init = \"normal(0, 1)\"\n", ""));
    assert_eq!(e.field, "arg[0] (x).init");
    assert!(e.message.contains("needs `init`"), "{e}");

    let e = error(&GOOD.replace("type = \"float*\"", "type = \"const float*\""));
    assert_eq!(e.field, "arg[1] (y).output");
    assert!(e.message.contains("const"), "{e}");
}

#[test]
fn bad_distribution() {
    let text = GOOD.replace("normal(0, 1)", "normal(0, 0)");
    let e = error(&text);
    assert_eq!(e.field, "arg[0] (x).init");
    assert_eq!(e.line, Some(line_of(&text, "normal(0, 0)")));
}

#[test]
fn check_sizes_must_bind_the_same_variables() {
    let text = GOOD.replace("{ rows = 67, cols = 4099 }", "{ rows = 67 }");
    let e = error(&text);
    assert_eq!(e.field, "sizes.check[1]");
    assert!(e.message.contains("every size must bind the same variables"), "{e}");
}

#[test]
fn scalars_without_value_must_be_size_variables() {
    let text = GOOD.replace("name = \"cols\"", "name = \"width\"");
    let e = error(&text);
    assert_eq!(e.field, "arg[3] (width).value");
    assert!(e.message.contains("not a size variable"), "{e}");
}

#[test]
fn scalar_values_must_fit_their_type() {
    let text =
        GOOD.replace("name = \"rows\"\ntype = \"int\"", "name = \"rows\"\ntype = \"int\"\nvalue = \"rows * 1000000\"");
    let e = error(&text);
    assert!(e.message.contains("does not fit `int`"), "{e}");
}

#[test]
fn negative_lengths_and_overflows_are_caught_per_size() {
    let e = error(&GOOD.replacen("len = \"rows * cols\"", "len = \"rows - 2\"", 1));
    assert!(e.message.contains("at size rows=1 cols=1 the length is -1"), "{e}");
    let e = error(&GOOD.replacen("len = \"rows * cols\"", "len = \"rows * cols * 9223372036854775807 * 2\"", 1));
    assert!(e.message.contains("overflow"), "{e}");
}

#[test]
fn seeds_and_tolerances_are_range_checked() {
    let text = GOOD.replace("seeds = 2", "seeds = 0");
    let e = error(&text);
    assert_eq!(e.field, "check.seeds");
    assert_eq!(e.line, Some(line_of(&text, "seeds = 0")));
    let e = error(&GOOD.replace("rtol = 1e-5", "rtol = -1.0"));
    assert_eq!(e.field, "check.rtol");
}

#[test]
fn the_build_timeout_is_read_and_range_checked() {
    assert_eq!(load(GOOD).unwrap().build.timeout_s, None);
    let t = load(&format!("{GOOD}\n[build]\ntimeout_s = 30\n")).unwrap();
    assert_eq!(t.build.timeout_s, Some(30.0));
    let text = format!("{GOOD}\n[build]\ntimeout_s = 0\n");
    let e = error(&text);
    assert_eq!(e.field, "build.timeout_s");
    assert_eq!(e.line, Some(line_of(&text, "timeout_s = 0")));
}

#[test]
fn tune_knobs_must_be_macro_names() {
    let e = error(&GOOD.replace("BLOCK = [128, 256]", "\"2BLOCK\" = [128]"));
    assert_eq!(e.field, "tune.2BLOCK");
    let e = error(&GOOD.replace("BLOCK = [128, 256]", "BLOCK = []"));
    assert!(e.message.contains("at least one value"), "{e}");
}

#[test]
fn a_task_without_outputs_checks_nothing() {
    let e = error(&GOOD.replace("output = true", "init = \"zeros\""));
    assert!(e.message.contains("no argument has output = true"), "{e}");
}

#[test]
fn unused_size_variables_are_reported() {
    let text = GOOD
        .replace("bench = { rows = 8192, cols = 4096 }", "bench = { rows = 8192, cols = 4096, k = 1 }")
        .replace("{ rows = 1, cols = 1 }", "{ rows = 1, cols = 1, k = 1 }")
        .replace("{ rows = 67, cols = 4099 }", "{ rows = 67, cols = 4099, k = 1 }");
    let e = error(&text);
    assert!(e.message.contains("`k` is used by no argument"), "{e}");
}

#[test]
fn missing_task_file_says_what_a_task_directory_is() {
    let dir = tempfile::tempdir().unwrap();
    let e = Task::load(dir.path()).unwrap_err();
    assert!(e.message.contains("no task.toml here"), "{e}");
}

#[test]
fn discover_lists_only_task_directories() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("b")).unwrap();
    std::fs::write(root.path().join("b/task.toml"), GOOD).unwrap();
    std::fs::create_dir(root.path().join("a")).unwrap();
    std::fs::write(root.path().join("a/task.toml"), GOOD).unwrap();
    std::fs::create_dir(root.path().join("not_a_task")).unwrap();
    let found = discover(root.path()).unwrap();
    let names: Vec<_> = found.iter().map(|p| p.file_name().unwrap().to_str().unwrap().to_string()).collect();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn absurd_buffers_are_refused_before_allocation() {
    let e = error(&GOOD.replacen("len = \"rows * cols\"", "len = \"rows * cols * 9223372036854775807\"", 1));
    assert!(e.message.contains("the buffer would hold"), "{e}");
}

#[test]
fn sizes_keep_their_written_order_and_must_be_integers() {
    let t = load(GOOD).unwrap();
    assert_eq!(t.bench.to_string(), "rows=8192 cols=4096");
    let e = error(&GOOD.replace("bench = { rows = 8192, cols = 4096 }", "bench = { rows = 8192, cols = 4.5 }"));
    assert_eq!(e.field, "sizes.bench.cols");
    assert!(e.message.contains("expected an integer, found 4.5"), "{e}");
    let e = error(&GOOD.replace("{ rows = 1, cols = 1 }", "{ rows = -1, cols = 1 }"));
    assert_eq!(e.field, "sizes.check[0].rows");
    assert!(e.message.contains("expected a size >= 0, found -1"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Errors as the user reads them: file, line, field, and what was expected, in words.

/// The error for `text` as `nightshift validate` prints it (with `task.toml` as the file).
fn shown(text: &str) -> String {
    let dir = dir_with_baseline();
    Task::from_text(dir.path(), Path::new("task.toml"), text).expect_err("the task should be rejected").to_string()
}

/// serde's and Rust's words that must never reach the user.
fn assert_in_words(shown: &str) {
    for rust in ["i64", "f64", "u32", "a sequence", "a map", "struct ", "$__serde", "Spanned", "invalid type"] {
        assert!(!shown.contains(rust), "`{rust}` in: {shown}");
    }
}

#[test]
fn a_string_where_an_integer_is_expected() {
    let text = GOOD.replace("seeds = 2", "seeds = \"three\"");
    let e = shown(&text);
    assert_in_words(&e);
    assert!(e.starts_with(&format!("task.toml:{}: check.seeds: ", line_of(&text, "three"))), "{e}");
    insta::assert_snapshot!(e);
}

#[test]
fn a_wrong_type_in_a_nested_table() {
    let text = GOOD.replace("bench = { rows = 8192, cols = 4096 }", "bench = { rows = \"many\", cols = 4096 }");
    let e = shown(&text);
    assert_in_words(&e);
    insta::assert_snapshot!("nested_size", e);
    let text = GOOD.replace("type = \"int\"", "type = 3");
    let e = shown(&text);
    assert_in_words(&e);
    assert!(e.contains("arg[2] (rows).type"), "the arg is named: {e}");
    insta::assert_snapshot!("nested_arg_type", e);
    let e = shown(&GOOD.replace("BLOCK = [128, 256]", "BLOCK = 128"));
    assert_in_words(&e);
    insta::assert_snapshot!("nested_tune_list", e);
}

#[test]
fn a_bad_arg_length_expression() {
    let e = shown(&GOOD.replacen("len = \"rows * cols\"", "len = \"rows * colz\"", 1));
    assert!(e.contains("arg[0] (x).len"), "{e}");
    insta::assert_snapshot!("bad_len_unknown_name", e);
    let e = shown(&GOOD.replacen("len = \"rows * cols\"", "len = \"rows * (cols\"", 1));
    insta::assert_snapshot!("bad_len_syntax", e);
}

#[test]
fn an_unknown_field() {
    let e = shown(&GOOD.replace("output = true", "outptu = true"));
    assert_in_words(&e);
    assert!(e.contains("did you mean `output`?"), "{e}");
    insta::assert_snapshot!("unknown_arg_field", e);
    let e = shown(&GOOD.replace("[check]", "[chek]"));
    assert_in_words(&e);
    insta::assert_snapshot!("unknown_table", e);
}

#[test]
fn a_missing_required_field() {
    let e = shown(&GOOD.replace("entry = \"softmax\"\n", ""));
    assert_in_words(&e);
    insta::assert_snapshot!("missing_entry", e);
    let e = shown(&GOOD.replacen("type = \"float*\"\n", "", 1));
    assert_in_words(&e);
    assert!(e.contains("arg[1] (y).type"), "{e}");
    insta::assert_snapshot!("missing_arg_type", e);
}

#[test]
fn semantic_errors_name_the_field_and_line_too() {
    // A size no argument uses: the line of the size, not of the table.
    let text = GOOD.replace(
        "bench = { rows = 8192, cols = 4096 }\ncheck = [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]",
        "check = [{ rows = 1, cols = 1, batch = 1 }]\n[sizes.bench]\nrows = 8192\ncols = 4096\nbatch = 2",
    );
    let e = error(&text);
    assert_eq!((e.field.as_str(), e.line), ("sizes.bench.batch", Some(line_of(&text, "batch = 2"))), "{e}");
    // A float value for an integer parameter.
    let text = GOOD.replace("name = \"cols\"\ntype = \"int\"", "name = \"cols\"\ntype = \"int\"\nvalue = 2.5");
    let e = shown(&text);
    assert_in_words(&e);
    insta::assert_snapshot!("float_for_int_value", e);
}

#[test]
fn a_task_whose_inputs_are_all_constant_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baseline.cu"), "// k").unwrap();
    let text = |init: &str| {
        format!(
            r#"[task]
name = "t"
entry = "k"
baseline = "baseline.cu"
[[arg]]
name = "x"
type = "const float*"
len = "n"
init = "{init}"
[[arg]]
name = "y"
type = "float*"
len = "n"
output = true
[[arg]]
name = "n"
type = "int"
[sizes]
bench = {{ n = 67108864 }}
check = [{{ n = 3 }}]
"#
        )
    };
    let load = |init: &str| Task::from_text(dir.path(), &dir.path().join("task.toml"), &text(init)).unwrap();
    assert_eq!(load("ones").warnings().len(), 1, "a constant input");
    assert!(load("arange").warnings()[0].contains("same inputs"));
    assert!(load("normal(0, 1)").warnings().is_empty());
}

/// A bench size too short to time or too large to hold, and a check size too large to
/// run on every candidate, are each said, with the figures.
#[test]
fn sizes_outside_what_a_gpu_times_and_holds_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("baseline.cu"), "// k").unwrap();
    // The softmax task above at other sizes.
    let text = |bench: &str, check: &str| {
        GOOD.replace("bench = { rows = 8192, cols = 4096 }", &format!("bench = {bench}"))
            .replace("check = [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]", &format!("check = [{check}]"))
    };
    let warnings = |bench: &str, check: &str| {
        Task::from_text(dir.path(), &dir.path().join("task.toml"), &text(bench, check)).unwrap().warnings()
    };
    // 2 x 4 bytes x 2^26 = 537 MB: 179 us at 3 TB/s; checks of a million elements.
    assert!(warnings("{ rows = 16384, cols = 4096 }", "{ rows = 257, cols = 4000 }").is_empty());
    let short = warnings("{ rows = 4096, cols = 128 }", "{ rows = 3, cols = 5 }");
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(short[0].contains("moves 4.2 MB: about 1.4 us at 3.0 TB/s, under 50 us"), "{short:?}");
    let huge = warnings("{ rows = 1048576, cols = 4096 }", "{ rows = 3, cols = 5 }");
    assert!(huge.iter().any(|w| w.contains("holds 34359.7 MB of buffers, over 20 GiB")), "{huge:?}");
    let big_check = warnings("{ rows = 16384, cols = 4096 }", "{ rows = 4097, cols = 4096 }");
    assert_eq!(big_check.len(), 1, "{big_check:?}");
    assert!(big_check[0].contains("check size 0 (rows=4097 cols=4096) has a buffer of 16781312 elements, over 4M"));
}

const SERVED: &str = "check = [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]\nserve = [\n  { name = \"decode\", rows = 8, weight = 0.6 },\n  { name = \"chunk\", rows = 512, weight = 0.3 },\n  { rows = 8192, cols = 4096, weight = 0.1 },\n]\nserve_weights = \"calls\"";

fn served(entries: &str) -> String {
    GOOD.replace("check = [{ rows = 1, cols = 1 }, { rows = 67, cols = 4099 }]", entries)
}

#[test]
fn three_weighted_shapes_resolve_over_the_bench_size() {
    let t = load(&served(SERVED)).unwrap();
    assert!(t.serves_shapes());
    let shapes = t.served();
    let names: Vec<&str> = shapes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["decode", "chunk", "rows=8192 cols=4096"], "an unnamed shape is named by what it changes");
    assert_eq!(shapes[0].size.vars["rows"], 8);
    assert_eq!(shapes[0].size.vars["cols"], 4096, "a variable a shape leaves alone keeps the bench value");
    assert_eq!(shapes[0].size.order, t.bench.order);
    let total: f64 = shapes.iter().map(|s| s.weight).sum();
    assert!((total - 1.0).abs() < 1e-12 && (shapes[0].weight - 0.6).abs() < 1e-12);
    assert_eq!(t.serve_weights, serve::WeightBasis::Calls);
    // Weights need not sum to 1: they are shares.
    let t = load(&served(&SERVED.replace("0.6", "6").replace("0.3", "3").replace("0.1", "1"))).unwrap();
    assert!((t.served()[1].weight - 0.3).abs() < 1e-12);
    // A task without `serve` serves its bench size alone.
    let plain = load(GOOD).unwrap();
    assert!(!plain.serves_shapes());
    assert_eq!(plain.served().len(), 1);
    assert_eq!((plain.served()[0].weight, &plain.served()[0].size), (1.0, &plain.bench));
}

#[test]
fn a_bad_served_shape_names_its_field_line_and_what_was_expected() {
    for (from, to, field, says) in [
        ("rows = 8, weight = 0.6", "rows = 8", "sizes.serve[0].weight", "missing"),
        ("weight = 0.6", "weight = 0", "sizes.serve[0].weight", "a number > 0"),
        ("weight = 0.6", "weight = \"most\"", "sizes.serve[0].weight", "a number > 0, found \"most\" (a string)"),
        ("rows = 8,", "tokens = 8,", "sizes.serve[0].tokens", "`tokens` is not a size variable (rows, cols)"),
        ("rows = 8,", "rows = -8,", "sizes.serve[0].rows", "a size >= 0"),
        ("rows = 8,", "rows = 8.5,", "sizes.serve[0].rows", "expected an integer"),
        ("\"chunk\"", "\"decode\"", "sizes.serve[1].name", "`decode` names two served shapes"),
        ("rows = 512,", "rows = 8,", "sizes.serve[1]", "the same size as served shape `decode`"),
        ("serve_weights = \"calls\"", "serve_weights = \"tokens\"", "sizes.serve_weights", "\"calls\""),
    ] {
        let text = served(&SERVED.replacen(from, to, 1));
        let e = error(&text);
        assert_eq!(e.field, field, "{e}");
        assert!(e.message.contains(says), "{e}");
        assert!(e.line.is_some(), "{e}");
    }
    let many: Vec<String> = (1..=9).map(|r| format!("{{ rows = {r}, weight = 1 }}")).collect();
    let e = error(&served(&format!("check = [{{ rows = 1, cols = 1 }}]\nserve = [{}]", many.join(", "))));
    assert!(e.message.contains("at most 8"), "{e}");
}

#[test]
fn weights_of_calls_become_shares_of_the_baselines_time() {
    let calls = serve::WeightBasis::Calls.time_shares(&[0.9, 0.1], &[0.01, 1.0]);
    assert!((calls[0] - 0.009 / 0.109).abs() < 1e-12 && (calls[1] - 0.1 / 0.109).abs() < 1e-12, "{calls:?}");
    assert_eq!(serve::WeightBasis::Time.time_shares(&[0.9, 0.1], &[0.01, 1.0]), vec![0.9, 0.1]);
    assert_eq!(serve::WeightBasis::Calls.time_shares(&[0.5, 0.5], &[f64::NAN, 0.0]), vec![0.5, 0.5]);
}

#[test]
fn a_served_shape_past_the_memory_budget_is_warned_about_and_a_small_one_is_not() {
    let t = load(&served(&SERVED.replace("rows = 512", "rows = 2000000"))).unwrap();
    let w = t.warnings();
    assert!(w.iter().any(|w| w.contains("served shape `chunk`") && w.contains("GiB")), "{w:?}");
    assert!(!w.iter().any(|w| w.contains("`decode`")), "a decode shape is small by nature: {w:?}");
}
