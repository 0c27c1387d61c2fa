//! The report's plots as inline SVG (plotters' SVG backend): no files, no fonts fetched,
//! nothing external.
//!
//! Each plot is drawn on a canvas as wide as the HTML report's column (WIDTH logical
//! pixels) and then made to scale: the root element keeps its viewBox and takes 100% of
//! the width, so at the ~1400 px the report is read at, one SVG unit is about one CSS
//! pixel and the labels below are their size on screen.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;

/// The canvas, in SVG units (about CSS pixels at the report's width).
pub const WIDTH: u32 = 1280;
const HEIGHT: u32 = 420;
/// Text sizes as plotters takes them; its SVG backend writes `font-size` = size / 1.24,
/// so these come out at about 17, 19 and 21 px.
const TICK_FONT: f64 = 21.0;
const AXIS_FONT: f64 = 23.0;
const TITLE_FONT: f64 = 26.0;
/// At most this many labelled ticks on the x axis.
const X_TICKS: usize = 12;

/// An x axis whose labelled ticks are given, at round steps (whole numbers where the
/// quantity is a count). plotters' own f64 axis picks its ticks alone (0.0, 0.5, 1.0 on
/// a node axis), and its key-point decorator cannot take a label formatter.
struct XAxis {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for XAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Light (minor) grid lines are not drawn.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// A tick step of 1, 2 or 5 times a power of ten that puts at most `max_ticks` ticks on
/// [0, span]; at least 1 when the axis counts things.
fn round_step(span: f64, max_ticks: usize, whole: bool) -> f64 {
    let raw = (span / max_ticks.max(1) as f64).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power);
    if whole {
        step.max(1.0).round()
    } else {
        step
    }
}

/// Labels that show as many decimals as the step needs (none for whole steps).
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10() - 1e-9).ceil() as usize };
    format!("{v:.decimals$}")
}

/// The axis [0, hi] with its ticks at multiples of a round step, and that step.
fn x_axis(hi: f64, whole: bool) -> (XAxis, f64) {
    let step = round_step(hi, X_TICKS, whole);
    let ticks = (0..).map(|i| i as f64 * step).take_while(|t| *t <= hi * (1.0 + 1e-9)).collect();
    (XAxis { linear: (0f64..hi).into(), ticks }, step)
}

/// Makes plotters' fixed-size SVG scale to its container's width (the viewBox keeps the
/// aspect ratio, so the height follows).
fn fluid(svg: String) -> String {
    svg.replacen(&format!("width=\"{WIDTH}\" height=\"{HEIGHT}\""), "class=\"plot\" width=\"100%\"", 1)
}

/// What drawing on the SVG canvas can fail with.
type DrawError = DrawingAreaErrorKind<std::io::Error>;

fn document(
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), DrawError>,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        // A plot that fails to draw leaves a blank canvas; the report still renders.
        let _ = root.fill(&WHITE).and_then(|_| draw(&root));
        let _ = root.present();
    }
    fluid(svg)
}

/// The unit a wall-time axis reads best in, for a run of `seconds`: (divisor, unit).
fn time_unit(seconds: f64) -> (f64, &'static str) {
    if seconds <= 300.0 {
        (1.0, "s")
    } else if seconds <= 3.0 * 3600.0 {
        (60.0, "min")
    } else {
        (3600.0, "h")
    }
}

/// The best speedup so far against wall time since the run started, as an SVG document.
pub fn best_over_time(points: &[(f64, f64)]) -> String {
    let span = points.iter().map(|p| p.0).fold(0.0f64, f64::max);
    let (divisor, unit) = time_unit(span);
    let scaled: Vec<(f64, f64)> = points.iter().map(|&(t, s)| (t / divisor, s)).collect();
    document(|root| {
        draw_best(root, &scaled, false, &format!("wall time since the start ({unit})"), "Best speedup over wall time")
    })
}

/// The best speedup so far against node ids (whole-number ticks), as an SVG document.
pub fn best_over_nodes(points: &[(usize, f64)]) -> String {
    let points: Vec<(f64, f64)> = points.iter().map(|&(n, s)| (n as f64, s)).collect();
    document(|root| draw_best(root, &points, true, "node (in the order they were created)", "Best speedup over nodes"))
}

fn draw_best(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    points: &[(f64, f64)],
    whole_x: bool,
    x_desc: &str,
    caption: &str,
) -> Result<(), DrawError> {
    let x_max = points.iter().map(|p| p.0).fold(if whole_x { 1.0 } else { 0.0 }, f64::max).max(f64::MIN_POSITIVE);
    let y_max = points.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    // Room after the last point, so it does not sit on the frame.
    let x_end = if whole_x { x_max + 0.4 } else { x_max * 1.03 };
    let (x_range, step) = x_axis(x_end, whole_x);
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", TITLE_FONT))
        .margin(16)
        .x_label_area_size(64)
        .y_label_area_size(96)
        .build_cartesian_2d(x_range, 0.9f64..y_max.max(1.2))?;
    let x_fmt = |v: &f64| tick_label(*v, step);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("best speedup (x the baseline)")
        .x_labels(X_TICKS + 1)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v| format!("{v:.2}"))
        .label_style(("sans-serif", TICK_FONT))
        .axis_desc_style(("sans-serif", AXIS_FONT))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    // Steps: the best holds until the next improvement.
    let mut steps = Vec::with_capacity(points.len() * 2);
    let mut last = 1.0;
    for &(x, y) in points {
        steps.push((x, last));
        steps.push((x, y));
        last = y;
    }
    // The best holds to the end of the axis.
    steps.push((x_end, last));
    chart.draw_series(LineSeries::new(steps, BLUE.stroke_width(3)))?;
    chart.draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 5, BLUE.filled())))?;
    chart.draw_series(LineSeries::new([(0.0, 1.0), (x_end, 1.0)], BLACK.mix(0.4)))?;
    Ok(())
}

/// The points no other point beats on both time and energy (lower is better on both),
/// sorted by time.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut front: Vec<(f64, f64)> = Vec::new();
    for p in sorted {
        if front.last().is_none_or(|last| p.1 < last.1) {
            front.push(p);
        }
    }
    front
}

/// Time (ms) against energy (mJ) per call for every correct node, with the Pareto front.
pub fn time_energy(points: &[(f64, f64)]) -> String {
    document(|root| draw_time_energy(root, points))
}

fn draw_time_energy(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    points: &[(f64, f64)],
) -> Result<(), DrawError> {
    let (x_max, y_max) = points.iter().fold((0f64, 0f64), |m, p| (m.0.max(p.0), m.1.max(p.1)));
    let (x_range, step) = x_axis((x_max * 1.1).max(1e-6), false);
    let mut chart = ChartBuilder::on(root)
        .caption("Time against energy per call (correct nodes)", ("sans-serif", TITLE_FONT))
        .margin(16)
        .x_label_area_size(64)
        .y_label_area_size(110)
        .build_cartesian_2d(x_range, 0f64..(y_max * 1.1).max(1e-6))?;
    let x_fmt = |v: &f64| tick_label(*v, step);
    chart
        .configure_mesh()
        .x_desc("time per call (ms)")
        .y_desc("energy per call (mJ)")
        .x_labels(X_TICKS + 1)
        .x_label_formatter(&x_fmt)
        .label_style(("sans-serif", TICK_FONT))
        .axis_desc_style(("sans-serif", AXIS_FONT))
        .draw()?;
    chart.draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 5, BLUE.mix(0.6).filled())))?;
    chart.draw_series(LineSeries::new(pareto_front(points), RED.stroke_width(3)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pareto_front_keeps_only_undominated_points() {
        let pts = [(1.0, 5.0), (2.0, 3.0), (2.5, 4.0), (3.0, 1.0), (0.5, 9.0), (3.0, 2.0), (f64::NAN, 0.0)];
        assert_eq!(pareto_front(&pts), vec![(0.5, 9.0), (1.0, 5.0), (2.0, 3.0), (3.0, 1.0)]);
    }

    #[test]
    fn plots_are_svg_documents_that_scale_to_the_page() {
        for svg in [best_over_nodes(&[(0, 1.0), (10, 1.3)]), time_energy(&[(0.1, 0.5), (0.08, 0.6)])] {
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
            let root = &svg[..svg.find('>').unwrap()];
            assert!(root.contains("width=\"100%\"") && root.contains(&format!("viewBox=\"0 0 {WIDTH} ")), "{root}");
            assert!(!root.contains("height="), "the height follows the width: {root}");
            assert!(svg.contains("<circle"));
        }
    }

    /// The x labels the SVG shows, in order (text elements that parse as numbers and sit
    /// on the x axis's baseline, i.e. share the most common y).
    fn x_tick_labels(svg: &str) -> Vec<String> {
        let mut texts: Vec<(String, String)> = Vec::new();
        for part in svg.split("<text").skip(1) {
            let y = part.split("y=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string();
            let body = part.split('>').nth(1).and_then(|r| r.split('<').next()).unwrap_or("").trim().to_string();
            if body.parse::<f64>().is_ok() {
                texts.push((y, body));
            }
        }
        let mut counts = std::collections::BTreeMap::new();
        for (y, _) in &texts {
            *counts.entry(y.clone()).or_insert(0) += 1;
        }
        let Some(axis_y) = counts.into_iter().max_by_key(|(_, c)| *c).map(|(y, _)| y) else { return Vec::new() };
        texts.into_iter().filter(|(y, _)| *y == axis_y).map(|(_, t)| t).collect()
    }

    #[test]
    fn the_node_axis_has_whole_number_ticks() {
        for last in [1usize, 8, 10, 37, 250] {
            let points: Vec<(usize, f64)> = (0..=last).map(|n| (n, 1.0 + n as f64 / 100.0)).collect();
            let labels = x_tick_labels(&best_over_nodes(&points));
            assert!(labels.len() >= 2 && labels.len() <= X_TICKS + 1, "{last}: {labels:?}");
            assert_eq!(labels[0], "0", "{last}: {labels:?}");
            for l in &labels {
                assert!(l.parse::<u64>().is_ok(), "node {last}: tick `{l}` is not a whole number: {labels:?}");
            }
        }
    }

    #[test]
    fn axes_are_titled_with_units_and_labels_are_legible() {
        let svg = best_over_time(&[(0.0, 1.0), (40.0, 1.1), (900.0, 1.2)]);
        assert!(svg.contains("wall time since the start (min)"), "{svg}");
        assert!(svg.contains("best speedup (x the baseline)"));
        assert!(time_energy(&[(0.1, 0.5)]).contains("time per call (ms)"));
        for size in svg.split("font-size=\"").skip(1).filter_map(|r| r.split('"').next()) {
            let px: f64 = size.parse().unwrap();
            assert!(px >= 16.0, "font-size {px} on a {WIDTH}-wide canvas");
        }
    }

    #[test]
    fn round_steps() {
        assert_eq!(round_step(8.0, 12, true), 1.0);
        assert_eq!(round_step(37.0, 12, true), 5.0);
        assert_eq!(round_step(250.0, 12, true), 50.0);
        assert_eq!(round_step(0.12, 12, false), 0.01);
        assert_eq!(tick_label(0.25, 0.05), "0.25");
        assert_eq!(tick_label(3.0, 1.0), "3");
    }
}
