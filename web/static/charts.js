// Small time-series charts (uPlot, vendored under vendor/uplot and loaded
// as a classic script before the modules: window.uPlot). Each chart is an
// image to assistive technology, labelled with a text summary of what it
// shows (latest and highest value of each series), kept up to date.

// Colours with at least 4.5:1 contrast on white (WCAG AA), told apart by
// more than hue: the second series is dashed.
const palette = ['#2451a6', '#1f7a3d', '#b3261e', '#8a5a00'];
const dashes = [undefined, [6, 3], [2, 2], [8, 2, 2, 2]];

// chart draws series (name → values, null for a gap) over t (Unix
// seconds) into box, or updates the chart already there.
export function chart(box, title, t, series, { width = 300, height = 110, unit = '' } = {}) {
  let data = [t, ...Object.values(series)];
  // A history of one sample (a gateway just started) has no time range to
  // draw: show the minute before it, empty.
  if (t.length === 1) data = [[t[0] - 60, t[0]], ...Object.values(series).map((v) => [null, v[0]])];
  box.setAttribute('role', 'img');
  box.setAttribute('aria-label', summary(title, t, series, unit));
  if (box.uplot && box.uplot.series.length === data.length) {
    box.uplot.setData(data);
    return box.uplot;
  }
  if (box.uplot) box.uplot.destroy();
  if (!window.uPlot) { box.textContent = 'charts unavailable'; return null; }
  const opts = {
    title, width, height,
    legend: { show: true },
    cursor: { show: true, drag: { x: false, y: false } },
    scales: {
      x: { time: true },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [{ size: 24, font: '10px system-ui', stroke: '#4a5263' }, { size: 52, font: '10px system-ui', stroke: '#4a5263' }],
    series: [{}, ...Object.keys(series).map((label, i) => ({
      label, stroke: palette[i % palette.length], dash: dashes[i % dashes.length], width: 1.5, spanGaps: false,
      // Dots while there are too few samples for a line to show.
      points: { show: (u) => u.data[0].length < 4, size: 6, fill: palette[i % palette.length] },
    }))],
  };
  box.uplot = new window.uPlot(opts, data, box);
  // The chart's own parts are drawn for the eye; the label says it all.
  for (const n of box.querySelectorAll('.u-wrap, .u-legend')) n.setAttribute('aria-hidden', 'true');
  return box.uplot;
}

// summary says in words what a chart shows.
function summary(title, t, series, unit) {
  const mins = t.length > 1 ? Math.max(1, Math.round((t.at(-1) - t[0]) / 60)) : 0;
  const fmt = (v) => `${v >= 100 ? Math.round(v) : Number(v.toFixed(v >= 1 ? 1 : 3))}${unit ? ` ${unit}` : ''}`;
  const parts = Object.entries(series).map(([name, vs]) => {
    const known = vs.filter((v) => v !== null && v !== undefined);
    if (!known.length) return `${name}: no data`;
    return `${name} now ${fmt(known.at(-1))}, highest ${fmt(Math.max(...known))}`;
  });
  return `Chart of ${title}${mins ? ` over the last ${mins} min` : ''}: ${parts.join('; ')}.`;
}
