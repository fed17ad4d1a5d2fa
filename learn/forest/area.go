package forest

import (
	"encoding/json"
	"fmt"
	"math"
)

// AreaEstimate is a map's accuracy and class areas estimated from a
// reference sample stratified by map class, with 95 % confidence
// intervals, after Olofsson et al. (2014), "Good practices for estimating
// area and assessing accuracy of land change", Remote Sensing of
// Environment 148, 42–57 (equations 2–7, 9–11). Each map class is a
// stratum of weight W_i = N_i / N (its share of the map's pixels); the
// cell proportions are p_ij = W_i n_ij / n_i for n_ij sample pixels mapped
// i and referenced j out of the n_i sampled in stratum i. Intervals are
// ±1.96 standard errors, without the finite-population correction (as in
// the paper). Slices are in class order; a class never mapped has no
// stratum and its user's accuracy is NaN (null in JSON).
type AreaEstimate struct {
	MapPixels []int64 // N_i, pixels mapped as each class
	Sampled   []int64 // n_i, sample pixels in each stratum
	// Accuracy is the estimated overall accuracy Σ p_ii.
	Accuracy, AccuracyCI float64
	// User's (p_ii / p_i.) and producer's (p_jj / p_.j) accuracies.
	User, UserCI, Producer, ProducerCI []float64
	// Proportion is each class's estimated share of the area (p_.j), and
	// Pixels that share times the map's pixels, each with its interval.
	Proportion, ProportionCI, Pixels, PixelsCI []float64
}

// EstimateAreas computes the estimate from sample[j][i], the sample's
// pixels referenced j and mapped i (the [reference][predicted] layout of
// Metrics.Confusion), and mapPixels[i], every pixel mapped i. A stratum
// with mapped pixels needs at least two sample pixels, for its variance.
func EstimateAreas(sample [][]int64, mapPixels []int64) (AreaEstimate, error) {
	k := len(mapPixels)
	if len(sample) != k {
		return AreaEstimate{}, fmt.Errorf("area estimate: a %d-row sample for %d classes", len(sample), k)
	}
	e := AreaEstimate{MapPixels: mapPixels, Sampled: make([]int64, k)}
	var total float64
	for i, n := range mapPixels {
		total += float64(n)
		for j := range k {
			if len(sample[j]) != k {
				return AreaEstimate{}, fmt.Errorf("area estimate: sample row %d has %d columns for %d classes", j, len(sample[j]), k)
			}
			e.Sampled[i] += sample[j][i]
		}
		if n > 0 && e.Sampled[i] < 2 {
			return AreaEstimate{}, fmt.Errorf("area estimate: class %d has %d mapped pixels but %d in the sample (at least 2 needed)", i, n, e.Sampled[i])
		}
	}
	if total == 0 {
		return AreaEstimate{}, fmt.Errorf("area estimate: the map has no classified pixel")
	}
	// w[i] is stratum i's weight; q[i][j] = n_ij / n_i, the stratum's
	// sample share referenced j.
	w := make([]float64, k)
	q := make([][]float64, k)
	for i := range k {
		w[i] = float64(mapPixels[i]) / total
		q[i] = make([]float64, k)
		for j := range k {
			if e.Sampled[i] > 0 {
				q[i][j] = float64(sample[j][i]) / float64(e.Sampled[i])
			}
		}
	}
	e.accuracy(w, q)
	e.areas(w, q, total)
	e.producers(w, q, total)
	return e, nil
}

// accuracy sets the overall and user's accuracies (equations 2, 5, 6).
func (e *AreaEstimate) accuracy(w []float64, q [][]float64) {
	k := len(w)
	e.User, e.UserCI = make([]float64, k), make([]float64, k)
	var v float64
	for i := range k {
		e.Accuracy += w[i] * q[i][i]
		if e.MapPixels[i] == 0 {
			e.User[i], e.UserCI[i] = math.NaN(), math.NaN()
			continue
		}
		u, n := q[i][i], float64(e.Sampled[i])
		vu := u * (1 - u) / (n - 1)
		e.User[i], e.UserCI[i] = u, 1.96*math.Sqrt(vu)
		v += w[i] * w[i] * vu
	}
	e.AccuracyCI = 1.96 * math.Sqrt(v)
}

// areas sets each class's area proportion and pixels (equations 9–11).
func (e *AreaEstimate) areas(w []float64, q [][]float64, total float64) {
	k := len(w)
	e.Proportion, e.ProportionCI = make([]float64, k), make([]float64, k)
	e.Pixels, e.PixelsCI = make([]float64, k), make([]float64, k)
	for j := range k {
		var p, v float64
		for i := range k {
			if e.MapPixels[i] == 0 {
				continue
			}
			p += w[i] * q[i][j]
			v += w[i] * w[i] * q[i][j] * (1 - q[i][j]) / float64(e.Sampled[i]-1)
		}
		e.Proportion[j], e.ProportionCI[j] = p, 1.96*math.Sqrt(v)
		e.Pixels[j], e.PixelsCI[j] = p*total, 1.96*math.Sqrt(v)*total
	}
}

// producers sets the producer's accuracies (equations 3 and 7); a class
// no stratum's sample references has NaN.
func (e *AreaEstimate) producers(w []float64, q [][]float64, total float64) {
	k := len(w)
	e.Producer, e.ProducerCI = make([]float64, k), make([]float64, k)
	for j := range k {
		// N̂_.j, the estimated pixels referenced j.
		var nj float64
		for i := range k {
			nj += float64(e.MapPixels[i]) * q[i][j]
		}
		if nj == 0 {
			e.Producer[j], e.ProducerCI[j] = math.NaN(), math.NaN()
			continue
		}
		pa := float64(e.MapPixels[j]) * q[j][j] / nj
		var other float64
		for i := range k {
			if i == j || e.MapPixels[i] == 0 {
				continue
			}
			ni := float64(e.MapPixels[i])
			other += ni * ni * q[i][j] * (1 - q[i][j]) / float64(e.Sampled[i]-1)
		}
		var own float64
		if e.MapPixels[j] > 0 {
			nj0, u := float64(e.MapPixels[j]), q[j][j]
			own = nj0 * nj0 * (1 - pa) * (1 - pa) * u * (1 - u) / float64(e.Sampled[j]-1)
		}
		e.Producer[j] = pa
		e.ProducerCI[j] = 1.96 * math.Sqrt((own+pa*pa*other)/(nj*nj))
	}
}

// MarshalJSON writes the estimate with null where a value is undefined
// (NaN: a class never mapped, or never referenced).
func (e AreaEstimate) MarshalJSON() ([]byte, error) {
	null := func(v []float64) []*float64 {
		out := make([]*float64, len(v))
		for i := range v {
			if !math.IsNaN(v[i]) {
				out[i] = &v[i]
			}
		}
		return out
	}
	return json.Marshal(struct {
		MapPixels    []int64    `json:"map_pixels"`
		Sampled      []int64    `json:"sampled"`
		Accuracy     float64    `json:"overall_accuracy"`
		AccuracyCI   float64    `json:"overall_accuracy_ci95"`
		User         []*float64 `json:"users_accuracy"`
		UserCI       []*float64 `json:"users_accuracy_ci95"`
		Producer     []*float64 `json:"producers_accuracy"`
		ProducerCI   []*float64 `json:"producers_accuracy_ci95"`
		Proportion   []float64  `json:"area_proportion"`
		ProportionCI []float64  `json:"area_proportion_ci95"`
		Pixels       []float64  `json:"area_pixels"`
		PixelsCI     []float64  `json:"area_pixels_ci95"`
	}{e.MapPixels, e.Sampled, e.Accuracy, e.AccuracyCI, null(e.User), null(e.UserCI), null(e.Producer), null(e.ProducerCI),
		e.Proportion, e.ProportionCI, e.Pixels, e.PixelsCI})
}
