package schedule

import "github.com/chime-scheduler/chime/storage"

// Ended reports whether a periodic task is complete (API.md "End dates and
// run limits") once runs scheduled fires have finished and its next due
// time is next:
//   - max_runs (spec.MaxRuns > 0) is reached when runs >= MaxRuns;
//   - end_at (spec.EndAt != 0) is inclusive: an occurrence due exactly at
//     end_at still fires, so the task ends when next > EndAt.
//
// next == 0 (no further occurrence) is not an end by these rules; callers
// treat it as before (the task is done). One-shot tasks never end here.
func Ended(spec *storage.Spec, next int64, runs uint64) bool {
	if spec.Kind == storage.KindOnce {
		return false
	}
	if spec.MaxRuns > 0 && runs >= uint64(spec.MaxRuns) {
		return true
	}
	return spec.EndAt != 0 && next > spec.EndAt
}
