// Small time-series charts (uPlot, vendored under vendor/uplot and loaded
// as a classic script before the modules: window.uPlot).

const palette = ['#2451a6', '#1f7a3d', '#b3261e', '#8a5a00'];

// chart draws series (name → values) over t (Unix seconds) into box, or
// updates the chart already there.
export function chart(box, title, t, series, { width = 300, height = 110 } = {}) {
  const data = [t, ...Object.values(series)];
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
    scales: { x: { time: true }, y: { range: (_u, min, max) => [0, Math.max(1, max * 1.1, min)] } },
    axes: [{ size: 24, font: '10px system-ui' }, { size: 40, font: '10px system-ui' }],
    series: [{}, ...Object.keys(series).map((label, i) => ({ label, stroke: palette[i % palette.length], width: 1.5, points: { show: false } }))],
  };
  box.uplot = new window.uPlot(opts, data, box);
  box.setAttribute('role', 'img');
  box.setAttribute('aria-label', `${title}: ${Object.keys(series).join(', ')} over the last ${Math.round((t.at(-1) - t[0]) / 60 || 0)} minutes`);
  return box.uplot;
}
