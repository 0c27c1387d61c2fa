fn main() {
    let path = std::env::args().nth(1).expect("a SASS text file");
    let text = std::fs::read_to_string(path).unwrap();
    for f in sass::parse(&text).functions {
        println!("{} {:?} {}", f.name, f.arch, f.instructions.len());
    }
}
