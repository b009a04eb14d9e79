//! The stretch over time, drawn as an SVG (plotters' SVG backend: no font or image library
//! needed): facts waiting and the oldest one's age, the queues' depths, the tick's minutes
//! behind, and DynamoDB's throttled attempts, each per minute of the stretch.

use crate::run::Outcome;
use plotters::prelude::*;
use std::path::Path;

type Series = (String, Vec<(f64, f64)>);

pub fn draw(outcome: &Outcome, path: &Path) -> anyhow::Result<()> {
    let minutes = |at_ms: u64| (at_ms.saturating_sub(outcome.start_ms)) as f64 / 60_000.0;
    let waiting: Vec<(f64, f64)> = outcome
        .timeline
        .iter()
        .map(|t| (minutes(t.0), t.2 as f64))
        .collect();
    let oldest: Vec<(f64, f64)> = outcome
        .timeline
        .iter()
        .map(|t| (minutes(t.0), t.3 as f64 / 60_000.0))
        .collect();
    let behind: Vec<(f64, f64)> = outcome
        .timeline
        .iter()
        .map(|t| (minutes(t.0), t.1 as f64))
        .collect();
    let mut depths: Vec<Series> = outcome
        .depths
        .iter()
        .map(|(queue, samples)| {
            let points = samples
                .iter()
                .map(|s| {
                    (
                        minutes(s.at_ms),
                        (s.visible + s.in_flight + s.delayed) as f64,
                    )
                })
                .collect::<Vec<_>>();
            (queue.clone(), points)
        })
        .filter(|(_, points)| points.iter().any(|(_, depth)| *depth > 0.0))
        .collect();
    depths.sort_by(|a, b| peak(&b.1).total_cmp(&peak(&a.1)));
    depths.truncate(6);
    let throttles: Vec<(f64, f64)> = outcome
        .dynamo_by_minute
        .iter()
        .map(|(at, usage)| (minutes(*at), usage.throttled_attempts as f64))
        .collect();

    let root = SVGBackend::new(path, (1200, 1400)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((4, 1));
    let end = minutes(outcome.settled_ms).max(1.0);
    panel(
        &panels[0],
        "facts waiting for WeCom (count) and the oldest's age (minutes)",
        end,
        &[
            ("facts waiting".into(), waiting),
            ("oldest, minutes".into(), oldest),
        ],
    )?;
    panel(&panels[1], "queue depth (messages)", end, &depths)?;
    panel(
        &panels[2],
        "schedule tick: minutes behind the clock",
        end,
        &[("minutes behind".into(), behind)],
    )?;
    panel(
        &panels[3],
        "DynamoDB throttled attempts per minute",
        end,
        &[("throttled".into(), throttles)],
    )?;
    root.present()?;
    Ok(())
}

fn peak(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|(_, y)| *y).fold(0.0, f64::max)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    end: f64,
    series: &[Series],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let top = series
        .iter()
        .map(|(_, points)| peak(points))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..end, 0.0..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("minutes into the stretch")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (n, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(n).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
