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
