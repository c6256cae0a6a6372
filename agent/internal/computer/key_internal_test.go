package computer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTheDefaultKeyIsTheKeyOfATargetThatNamesNothing(t *testing.T) {
	assert.Equal(t, Target{}.key(), defaultKey)
}
