import Foundation

/// A line chart as inline SVG, several lines over the same intervals, drawn from numbers like ``BarChart``: no script,
/// no fetch. Every point is also a dot with a `<title>`, so one interval (a line of one point) still shows, and a
/// pointer reads its value.
struct LineChart {
    struct Line {
        var name: String
        var values: [Double]
    }

    /// One label per interval, under the axis.
    var labels: [String]
    var lines: [Line]
    /// How a value is written on the axis and in the points' titles (money in its unit, counts whole).
    var format: @Sendable (Double) -> String = { String(Int($0.rounded())) }
    var width = 360
    var height = 150
    /// How often an interval's label is written under the axis (every `labelEvery`th from the last).
    var labelEvery = 7
    /// The first is ``BarChart/fill``: the walk in Chromium finds the charts on a screenshot by it.
    static let colours = [BarChart.fill, "#e07b24", "#2e9b57", "#c23b3b", "#7d4fc4", "#6b7280"]

    var svg: String {
        let (top, bottom, left, right) = (26.0, 20.0, 44.0, 8.0)
        let plotHeight = Double(height) - top - bottom
        let plotWidth = Double(width) - left - right
        let all = lines.flatMap(\.values)
        // Zero always on the scale: a net revenue below it (a day of refunds) is drawn under the axis.
        let lowest = min(0, all.min() ?? 0)
        let highest = max(lowest + 1, all.max() ?? 0)
        let count = max(1, labels.count)
        let step = count > 1 ? plotWidth / Double(count - 1) : 0
        func x(_ index: Int) -> Double { count > 1 ? left + Double(index) * step : left + plotWidth / 2 }
        func y(_ value: Double) -> Double { top + plotHeight * (highest - value) / (highest - lowest) }
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" role="img">
            <text x="0" y="\(Int(top + 4))" font-size="10" fill="#667">\(BarChart.escaped(format(highest)))</text>
            <text x="0" y="\(Int(top + plotHeight))" font-size="10" fill="#667">\(BarChart.escaped(format(lowest)))</text>
            <line x1="\(Int(left))" y1="\(BarChart.number(y(0)))" x2="\(width - Int(right))" y2="\(BarChart.number(y(0)))" stroke="#bbb"/>
            """
        var legendX = left
        for (index, line) in lines.enumerated() {
            let colour = Self.colours[index % Self.colours.count]
            // Each line thinner than the one under it: where lines coincide (net equal to gross without refunds),
            // the first still shows as a band around the next.
            let below = Double(lines.count - 1 - index)
            let (stroke, radius) = (1.5 + 1.5 * below, 1.6 + 0.9 * below)
            out += "<rect x=\"\(BarChart.number(legendX))\" y=\"4\" width=\"10\" height=\"10\" fill=\"\(colour)\"/>"
                + "<text x=\"\(BarChart.number(legendX + 13))\" y=\"13\" font-size=\"10\" fill=\"#334\">\(BarChart.escaped(line.name))</text>"
            legendX += 22 + Double(line.name.count) * 5.6
            let points = line.values.prefix(count).enumerated().map { "\(BarChart.number(x($0.offset))),\(BarChart.number(y($0.element)))" }
            out += "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"\(BarChart.number(stroke))\" points=\"\(points.joined(separator: " "))\"/>"
            for (point, value) in line.values.prefix(count).enumerated() {
                let label = point < labels.count ? labels[point] : ""
                out += "<circle cx=\"\(BarChart.number(x(point)))\" cy=\"\(BarChart.number(y(value)))\" r=\"\(BarChart.number(radius))\" fill=\"\(colour)\">"
                    + "<title>\(BarChart.escaped("\(label) \(line.name): \(format(value))"))</title></circle>"
            }
        }
        for (index, label) in labels.enumerated() where (labels.count - 1 - index) % max(1, labelEvery) == 0 {
            // The last label is anchored at its end so it stays inside the chart.
            let anchor = index == labels.count - 1 && labels.count > 1 ? "end" : "middle"
            out += "<text x=\"\(BarChart.number(x(index)))\" y=\"\(height - 6)\" font-size=\"9\" fill=\"#667\" text-anchor=\"\(anchor)\">\(BarChart.escaped(label))</text>"
        }
        return out + "</svg>"
    }
}
