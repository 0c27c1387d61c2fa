fn main() -> std::process::ExitCode {
    nightshift::cli::main()
}
