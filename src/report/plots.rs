//! The report's plots as inline SVG (plotters' SVG backend): no files, no fonts fetched,
//! nothing external.

use plotters::prelude::*;

/// A step plot of the best speedup so far against `x`, as an SVG document.
pub fn best_so_far(points: &[(f64, f64)], x_label: &str, caption: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 300)).into_drawing_area();
        let _ = draw(&root, points, x_label, caption);
        let _ = root.present();
    }
    svg
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    points: &[(f64, f64)],
    x_label: &str,
    caption: &str,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let x_max = points.iter().map(|p| p.0).fold(1.0f64, f64::max);
    let y_max = points.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..x_max * 1.02, 0.9f64..y_max.max(1.2))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc("best speedup")
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| e.to_string())?;
    // Steps: the best holds until the next improvement.
    let mut steps = Vec::with_capacity(points.len() * 2);
    let mut last = 1.0;
    for &(x, y) in points {
        steps.push((x, last));
        steps.push((x, y));
        last = y;
    }
    chart.draw_series(LineSeries::new(steps, BLUE.stroke_width(2))).map_err(|e| e.to_string())?;
    chart.draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 3, BLUE.filled()))).map_err(|e| e.to_string())?;
    chart.draw_series(LineSeries::new([(0.0, 1.0), (x_max * 1.02, 1.0)], BLACK.mix(0.4))).map_err(|e| e.to_string())?;
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

/// Time against energy per call for every correct node, with the Pareto front.
pub fn time_energy(points: &[(f64, f64)]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 300)).into_drawing_area();
        let _ = draw_time_energy(&root, points);
        let _ = root.present();
    }
    svg
}

fn draw_time_energy(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    points: &[(f64, f64)],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (x_max, y_max) = points.iter().fold((0f64, 0f64), |m, p| (m.0.max(p.0), m.1.max(p.1)));
    let mut chart = ChartBuilder::on(root)
        .caption("time against energy per call (correct nodes)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..(x_max * 1.1).max(1e-6), 0f64..(y_max * 1.1).max(1e-6))
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc("ms per call").y_desc("mJ per call").draw().map_err(|e| e.to_string())?;
    chart
        .draw_series(points.iter().map(|&(x, y)| Circle::new((x, y), 3, BLUE.mix(0.6).filled())))
        .map_err(|e| e.to_string())?;
    chart.draw_series(LineSeries::new(pareto_front(points), RED.stroke_width(2))).map_err(|e| e.to_string())?;
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
    fn plots_are_svg_documents() {
        let svg = best_so_far(&[(0.0, 1.0), (10.0, 1.3)], "node", "best");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(time_energy(&[(0.1, 0.5), (0.08, 0.6)]).contains("<circle"));
    }
}
