import Foundation

/// A bar chart as inline SVG, drawn from numbers: no script, no fetch (the dashboard's policy allows neither).
struct BarChart {
    struct Bar {
        var label: String
        var value: Int
    }

    var bars: [Bar]
    var width = 360
    var height = 130
    /// How often a bar's label is written under the axis (every `labelEvery`th bar from the last).
    var labelEvery = 7
    static let fill = "#2f6fdf"

    var svg: String {
        let (top, bottom, left) = (14.0, 20.0, 28.0)
        let plotHeight = Double(height) - top - bottom
        let plotWidth = Double(width) - left - 4
        let highest = max(1, bars.map(\.value).max() ?? 0)
        let step = plotWidth / Double(max(1, bars.count))
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" role="img">
            <text x="0" y="\(Int(top))" font-size="10" fill="#667">\(highest)</text>
            <line x1="\(Int(left))" y1="\(Int(top + plotHeight))" x2="\(width - 4)" y2="\(Int(top + plotHeight))" stroke="#bbb"/>
            """
        for (index, bar) in bars.enumerated() {
            let barHeight = plotHeight * Double(bar.value) / Double(highest)
            let x = left + Double(index) * step
            out += "<rect x=\"\(Self.number(x + 1))\" y=\"\(Self.number(top + plotHeight - barHeight))\" width=\"\(Self.number(max(1, step - 2)))\" "
                + "height=\"\(Self.number(barHeight))\" fill=\"\(Self.fill)\"><title>\(Self.escaped(bar.label)): \(bar.value)</title></rect>"
            // Counted from the right: the latest bar (today) always has its label, and labels never overlap.
            if (bars.count - 1 - index) % labelEvery == 0 {
                out += "<text x=\"\(Self.number(x))\" y=\"\(height - 6)\" font-size=\"9\" fill=\"#667\">\(Self.escaped(bar.label))</text>"
            }
        }
        return out + "</svg>"
    }

    static func number(_ value: Double) -> String { String((value * 10).rounded() / 10) }

    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }
}
