package pipeline

import "image/color"

func rgba(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 0xff} }
