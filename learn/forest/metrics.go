package forest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Codes are class codes. In JSON they are a list of numbers ([10, 20,
// …]); a plain []uint8 would be a base64 string, which no reader of a
// metrics file expects. Lists and the base64 strings of older files are
// both read.
type Codes []uint8

// MarshalJSON writes the codes as a list of numbers.
func (c Codes) MarshalJSON() ([]byte, error) {
	ints := make([]int, len(c))
	for i, v := range c {
		ints[i] = int(v)
	}
	return json.Marshal(ints)
}

// UnmarshalJSON reads a list of codes, or the base64 string older lulc
// versions wrote.
func (c *Codes) UnmarshalJSON(b []byte) error {
	var ints []int
	if err := json.Unmarshal(b, &ints); err != nil {
		var raw []byte
		if err2 := json.Unmarshal(b, &raw); err2 != nil {
			return fmt.Errorf("class codes: %w", err)
		}
		*c = raw
		return nil
	}
	out := make(Codes, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return fmt.Errorf("class codes: %d is not a code (0–255)", v)
		}
		out[i] = uint8(v)
	}
	*c = out
	return nil
}

// Metrics summarise predictions against reference labels.
type Metrics struct {
	Classes   Codes     `json:"classes"`   // class codes, in matrix order
	Confusion [][]int64 `json:"confusion"` // [reference][predicted]
	Total     int64     `json:"total"`
	Accuracy  float64   `json:"overall_accuracy"`
	Kappa     float64   `json:"kappa"`
	Precision []float64 `json:"precision"`
	Recall    []float64 `json:"recall"`
	F1        []float64 `json:"f1"`
	Support   []int64   `json:"support"` // reference pixels per class
	MacroF1   float64   `json:"macro_f1"`
}

// Evaluate builds the confusion matrix of predicted against reference class
// indices (0…len(codes)−1) and derives the metrics. Precision, recall and
// F1 of a class with no predictions or no references are 0; macro-F1
// averages over classes present in the reference.
func Evaluate(ref, pred []uint8, codes []uint8) (Metrics, error) {
	if len(ref) != len(pred) {
		return Metrics{}, fmt.Errorf("metrics: %d references, %d predictions", len(ref), len(pred))
	}
	k := len(codes)
	m := Metrics{Classes: codes, Confusion: make([][]int64, k)}
	for i := range m.Confusion {
		m.Confusion[i] = make([]int64, k)
	}
	for i := range ref {
		if int(ref[i]) >= k || int(pred[i]) >= k {
			return Metrics{}, fmt.Errorf("metrics: class index %d/%d beyond %d classes", ref[i], pred[i], k)
		}
		m.Confusion[ref[i]][pred[i]]++
	}
	return FromConfusion(m.Confusion, codes)
}

// FromConfusion derives the metrics from a confusion matrix of counts,
// [reference][predicted] in the order of codes, as Evaluate does. It lets
// a caller count pixels window by window and never hold them all.
func FromConfusion(conf [][]int64, codes []uint8) (Metrics, error) {
	k := len(codes)
	if len(conf) != k {
		return Metrics{}, fmt.Errorf("metrics: confusion matrix of %d rows for %d classes", len(conf), k)
	}
	m := Metrics{Classes: codes, Confusion: conf}
	for _, row := range conf {
		if len(row) != k {
			return Metrics{}, fmt.Errorf("metrics: confusion row of %d counts for %d classes", len(row), k)
		}
		for _, v := range row {
			m.Total += v
		}
	}
	if m.Total == 0 {
		return Metrics{}, fmt.Errorf("metrics: no samples")
	}
	rows, cols := make([]int64, k), make([]int64, k)
	var diag int64
	for a := range k {
		for b := range k {
			rows[a] += m.Confusion[a][b]
			cols[b] += m.Confusion[a][b]
		}
		diag += m.Confusion[a][a]
	}
	n := float64(m.Total)
	m.Accuracy = float64(diag) / n
	pe := 0.0
	for a := range k {
		pe += float64(rows[a]) * float64(cols[a]) / (n * n)
	}
	if pe < 1 {
		m.Kappa = (m.Accuracy - pe) / (1 - pe)
	}
	m.Support = rows
	present := 0
	for a := range k {
		tp := float64(m.Confusion[a][a])
		p, r, f := 0.0, 0.0, 0.0
		if cols[a] > 0 {
			p = tp / float64(cols[a])
		}
		if rows[a] > 0 {
			r = tp / float64(rows[a])
			present++
		}
		if p+r > 0 {
			f = 2 * p * r / (p + r)
		}
		m.Precision = append(m.Precision, p)
		m.Recall = append(m.Recall, r)
		m.F1 = append(m.F1, f)
		if rows[a] > 0 {
			m.MacroF1 += f
		}
	}
	if present > 0 {
		m.MacroF1 /= float64(present)
	}
	return m, nil
}

// Table formats the metrics as a short text table, one line per class.
func (m Metrics) Table(names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "overall accuracy %.4f   kappa %.4f   macro-F1 %.4f   (%d pixels)\n", m.Accuracy, m.Kappa, m.MacroF1, m.Total)
	fmt.Fprintf(&b, "%-5s %-26s %9s %9s %9s %9s\n", "code", "class", "precision", "recall", "F1", "support")
	for i, c := range m.Classes {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		fmt.Fprintf(&b, "%-5d %-26s %9.4f %9.4f %9.4f %9d\n", c, name, m.Precision[i], m.Recall[i], m.F1[i], m.Support[i])
	}
	return b.String()
}
