package meter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seg(offset uint64, s string, order int) dataSegment {
	return dataSegment{offset: offset, bytes: []byte(s), order: order}
}

func TestSegmentsMergeAsInstantiationWritesThem(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want []dataSegment
	}{
		"later wins":      {[]dataSegment{seg(10, "aaaa", 0), seg(12, "bb", 1)}, []dataSegment{seg(10, "aabb", 0)}},
		"earlier loses":   {[]dataSegment{seg(12, "bb", 0), seg(10, "aaaa", 1)}, []dataSegment{seg(10, "aaaa", 0)}},
		"gap filled":      {[]dataSegment{seg(0, "a", 0), seg(3, "b", 1)}, []dataSegment{seg(0, "a\x00\x00b", 0)}},
		"far apart":       {[]dataSegment{seg(0, "a", 0), seg(1+mergeGap+1, "b", 1)}, []dataSegment{seg(0, "a", 0), seg(1+mergeGap+1, "b", 1)}},
		"empty dropped":   {[]dataSegment{seg(5, "", 0)}, []dataSegment{}},
		"sorted by place": {[]dataSegment{seg(9000, "b", 0), seg(0, "a", 1)}, []dataSegment{seg(0, "a", 1), seg(9000, "b", 0)}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := mergeSegments(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Merging never makes the data much larger than the module's own: a
// module of many tiny segments spaced just under the gap would otherwise
// turn a few kilobytes into megabytes of zeros.
func TestMergingAddsZerosOnlyWithinABudget(t *testing.T) {
	var in []dataSegment
	for i := range 1000 {
		in = append(in, seg(uint64(i)*mergeGap, "x", i))
	}
	out, err := mergeSegments(in)
	require.NoError(t, err)
	size := 0
	for _, s := range out {
		size += len(s.bytes)
	}
	assert.LessOrEqual(t, size, 1000+mergeFill+mergeGap)
	assert.Greater(t, len(out), 1)
}

func TestASegmentPastFourGiBIsRefused(t *testing.T) {
	_, err := mergeSegments([]dataSegment{seg(1<<32-1, "ab", 3)})
	assert.EqualError(t, err, "data segment 3: it ends past 4 GiB")
}
