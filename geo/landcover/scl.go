package landcover

import "image/color"

// SCL is the Sentinel-2 Level-2A scene classification (the SCL band Sen2Cor
// writes beside the reflectances) with the colours ESA's products use. It is
// not a land-cover scheme to train on: lulc reads it to mask clouds, cloud
// shadows and cirrus, and shows it to explain that mask. Code 0 (no data) is
// left out, as in every scheme.
var SCL = Scheme{
	Name: "sentinel-2-scl",
	Classes: []Class{
		{1, "Saturated or defective", color.RGBA{0xff, 0x00, 0x00, 0xff}},
		{2, "Dark area pixels", color.RGBA{0x2f, 0x2f, 0x2f, 0xff}},
		{3, "Cloud shadows", color.RGBA{0x64, 0x32, 0x00, 0xff}},
		{4, "Vegetation", color.RGBA{0x00, 0xa0, 0x00, 0xff}},
		{5, "Not vegetated", color.RGBA{0xff, 0xe6, 0x5a, 0xff}},
		{6, "Water", color.RGBA{0x00, 0x00, 0xff, 0xff}},
		{7, "Unclassified", color.RGBA{0x80, 0x80, 0x80, 0xff}},
		{8, "Cloud medium probability", color.RGBA{0xc0, 0xc0, 0xc0, 0xff}},
		{9, "Cloud high probability", color.RGBA{0xff, 0xff, 0xff, 0xff}},
		{10, "Thin cirrus", color.RGBA{0x64, 0xc8, 0xff, 0xff}},
		{11, "Snow or ice", color.RGBA{0xff, 0x96, 0xff, 0xff}},
	},
}
