//! The `--svg` chart of `sipllm bench`: tokens/s against threads, one line per schedule
//! policy, one panel per phase (decode, prefill) side by side, the tuned pick marked.

use plotters::prelude::*;
use std::collections::BTreeMap;

/// One measured configuration of a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartPoint {
    /// Threads, the caller included.
    pub threads: usize,
    /// The line it belongs to (a schedule policy's name, or a pinning variant).
    pub series: String,
    /// Median tokens per second.
    pub tokens_per_sec: f64,
}

/// One panel: a phase's measurements and the setting the tuner picked.
#[derive(Debug, Clone, PartialEq)]
pub struct PhasePanel {
    /// `decode` or `prefill` (the panel's title).
    pub phase: String,
    /// Every configuration measured; a configuration measured twice keeps its last figure.
    pub points: Vec<ChartPoint>,
    /// The pick: its threads, its series and its tokens/s.
    pub pick: Option<ChartPoint>,
}

/// Width and height of the whole drawing, in SVG pixels.
const SIZE: (u32, u32) = (1200, 480);

/// The SVG text of the chart: `title` above, one panel per entry of `panels`, left to right.
pub fn render_svg(title: &str, panels: &[PhasePanel]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let root = root.titled(title, ("sans-serif", 22)).map_err(draw_error)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (area, panel) in areas.iter().zip(panels) {
            draw_panel(area, panel)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// One panel: axes, a line per series, the pick circled and labelled.
fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    panel: &PhasePanel,
) -> Result<(), String> {
    let lines = series_lines(&panel.points);
    let max_threads = panel
        .points
        .iter()
        .map(|p| p.threads)
        .max()
        .unwrap_or(1)
        .max(2);
    let max_rate = panel
        .points
        .iter()
        .map(|p| p.tokens_per_sec)
        .filter(|&r| drawable(r))
        .fold(0.0f64, f64::max);
    let top = if max_rate > 0.0 { max_rate * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.phase, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..max_threads as f64 + 0.5, 0.0f64..top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("tokens/s")
        .x_labels(max_threads.min(16))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(draw_error)?;
    for (i, (name, points)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(draw_error)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(draw_error)?;
    }
    if let Some(pick) = panel.pick.as_ref().filter(|p| drawable(p.tokens_per_sec)) {
        let at = (pick.threads as f64, pick.tokens_per_sec);
        let plural = if pick.threads == 1 { "" } else { "s" };
        let label = format!("pick: {} thread{plural}, {}", pick.threads, pick.series);
        chart
            .draw_series([Circle::new(at, 9, BLACK.stroke_width(2))])
            .map_err(draw_error)?
            .label(label)
            .legend(|(x, y)| Circle::new((x + 8, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    Ok(())
}

/// The points of each series, sorted by threads, the last figure of a repeated
/// configuration winning; series in name order.
fn series_lines(points: &[ChartPoint]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut by_series: BTreeMap<String, BTreeMap<usize, f64>> = BTreeMap::new();
    for p in points.iter().filter(|p| drawable(p.tokens_per_sec)) {
        by_series
            .entry(p.series.clone())
            .or_default()
            .insert(p.threads, p.tokens_per_sec);
    }
    by_series
        .into_iter()
        .map(|(name, pts)| {
            let line = pts.into_iter().map(|(t, r)| (t as f64, r)).collect();
            (name, line)
        })
        .collect()
}

/// Whether a rate can be drawn: finite, not negative, and at most what a machine can
/// measure ([`auto_tuner::MAX_TOKENS_PER_SEC`]), so that the axis above it stays finite.
fn drawable(rate: f64) -> bool {
    rate.is_finite() && (0.0..=auto_tuner::MAX_TOKENS_PER_SEC).contains(&rate)
}

fn draw_error<E: std::error::Error>(e: E) -> String {
    format!("drawing the chart failed: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(threads: usize, series: &str, tokens_per_sec: f64) -> ChartPoint {
        ChartPoint {
            threads,
            series: series.to_string(),
            tokens_per_sec,
        }
    }

    fn panels() -> Vec<PhasePanel> {
        let decode = vec![
            point(1, "static", 10.0),
            point(2, "static", 18.0),
            point(2, "guided", 17.0),
            point(1, "guided", 9.0),
            point(2, "static", 19.0),
        ];
        let prefill = vec![point(1, "static", 100.0), point(2, "static", 190.0)];
        vec![
            PhasePanel {
                phase: "decode".into(),
                pick: Some(point(2, "static", 19.0)),
                points: decode,
            },
            PhasePanel {
                phase: "prefill".into(),
                pick: Some(point(2, "static", 190.0)),
                points: prefill,
            },
        ]
    }

    #[test]
    fn lines_are_per_series_sorted_by_threads_and_the_last_figure_wins() {
        let lines = series_lines(&panels()[0].points);
        assert_eq!(lines.keys().collect::<Vec<_>>(), ["guided", "static"]);
        assert_eq!(lines["guided"], [(1.0, 9.0), (2.0, 17.0)]);
        assert_eq!(lines["static"], [(1.0, 10.0), (2.0, 19.0)]);
    }

    #[test]
    fn the_svg_is_well_formed_with_both_panels_every_series_and_the_pick() {
        let svg = render_svg("llama3-8b q4_K_M", &panels()).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect();
        for expected in [
            "llama3-8b q4_K_M",
            "decode",
            "prefill",
            "static",
            "guided",
            "threads",
            "tokens/s",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "no text {expected:?} in {texts:?}"
            );
        }
        let picks = texts
            .iter()
            .filter(|t| t.as_str() == "pick: 2 threads, static")
            .count();
        assert_eq!(picks, 2, "one pick label per panel");
        // One polyline per series and panel: decode has two, prefill one.
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert!(lines >= 3, "{lines} polylines");
    }

    #[test]
    fn a_huge_finite_rate_is_left_out_and_the_chart_finishes() {
        // 1.6e308 × 1.15 is infinite: an axis up to it never finished its labels.
        let mut huge = panels();
        huge[0].points.push(point(3, "static", 1.6e308));
        huge[0].pick = Some(point(3, "static", 1.6e308));
        let svg = watchdog::guard("the chart", move || render_svg("huge", &huge)).unwrap();
        roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert!(!series_lines(&[point(3, "static", 1.6e308)]).contains_key("static"));
    }

    #[test]
    fn an_empty_panel_still_draws() {
        let empty = PhasePanel {
            phase: "decode".into(),
            points: vec![],
            pick: None,
        };
        let svg = render_svg("nothing measured", &[empty]).unwrap();
        roxmltree::Document::parse(&svg).expect("well-formed XML");
    }
}
