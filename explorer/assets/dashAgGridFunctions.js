/* Value formatters of the explorer's grids (dash-ag-grid looks functions up here). Raw values stay in the
 * grid for sorting, filtering and copying; only the display is formatted. */
var dagfuncs = window.dashAgGridFunctions = window.dashAgGridFunctions || {};
function nxNum(v) { return v === null || v === undefined || v === "" || (typeof v === "number" && !isFinite(v)); }
/* v in the largest of scales ([divisor, unit], largest first) that keeps it >= 1, up to 3 decimals */
function nxScaled(v, scales) {
  const a = Math.abs(v);
  const s = scales.find(([d]) => a >= d) || scales[scales.length - 1];
  return (v / s[0]).toLocaleString("en-US", {maximumFractionDigits: s[0] === 1 ? 0 : 3}) + " " + s[1];
}
dagfuncs.fmtUnit = function (v, unit) {
  if (nxNum(v)) return "";
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v);
  switch (unit) {
    case "ns": case "ts":
      if (a < 1e3) return v.toFixed(0) + " ns";
      if (a < 1e6) return (v / 1e3).toFixed(3) + " µs";
      if (a < 1e9) return (v / 1e6).toFixed(3) + " ms";
      return (v / 1e9).toFixed(4) + " s";
    case "bytes": return nxScaled(v, [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"], [1, "B"]]);  // as analysis.units
    case "bytes/s": return nxScaled(v, [[1e9, "GB/s"], [1e6, "MB/s"], [1, "B/s"]]);
    case "FLOP/s": return nxScaled(v, [[1e12, "TFLOP/s"], [1e9, "GFLOP/s"], [1e6, "MFLOP/s"], [1, "FLOP/s"]]);
    case "FLOP": return nxScaled(v, [[1e12, "TFLOP"], [1e9, "GFLOP"], [1e6, "MFLOP"], [1, "FLOP"]]);
    case "percent": return v.toFixed(a >= 10 ? 1 : 2) + " %";
    case "FLOP/byte": return v.toPrecision(4) + " FLOP/B";
    case "count": return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toLocaleString("en-US", {maximumFractionDigits: 2});
    default: return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toPrecision(6).replace(/\.?0+$/, "");
  }
};
