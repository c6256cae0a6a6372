package mcptool_test

import (
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/internal/mcptool"
)

// The gateway names a device's tool DEVICE__TOOL. A "." (or any other
// character a client refuses) becomes "_"; a name two tools would share
// goes to neither: each is cut to 55 characters and suffixed with "_" and
// a short hash of the tool's key (its device, namespace, type and name),
// as is a name longer than 64 characters.
func ExampleNames() {
	key := func(device, namespace, toolType, tool string) string {
		return device + "\x00" + namespace + "\x00" + toolType + "\x00" + tool
	}
	long := strings.Repeat("x", 60)
	names := mcptool.Names([]mcptool.Named{
		{Base: "kiosk-1__hash_file", Key: key("kiosk-1", "stock", "data_collection", "hash_file")},
		{Base: "lobby.2__read_file", Key: key("lobby.2", "stock", "data_collection", "read_file")},
		// One tool name in two namespaces of a device.
		{Base: "kiosk-1__browser_navigate", Key: key("kiosk-1", "browser", "action", "browser_navigate")},
		{Base: "kiosk-1__browser_navigate", Key: key("kiosk-1", "chrome", "action", "browser_navigate")},
		{Base: "kiosk-1__" + long, Key: key("kiosk-1", "stock", "action", long)},
	})
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// kiosk-1__hash_file
	// lobby_2__read_file
	// kiosk-1__browser_navigate_d322bd92
	// kiosk-1__browser_navigate_e388297f
	// kiosk-1__xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_6b108c92
}
