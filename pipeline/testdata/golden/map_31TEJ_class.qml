<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>
<qgis version="3.28" styleCategories="Symbology">
  <pipe>
    <rasterrenderer type="paletted" band="1" opacity="1" alphaBand="-1">
      <rasterTransparency></rasterTransparency>
      <colorPalette>
        <paletteEntry value="10" color="#006400" alpha="255" label="Tree cover"></paletteEntry>
        <paletteEntry value="20" color="#ffbb22" alpha="255" label="Shrubland"></paletteEntry>
        <paletteEntry value="30" color="#ffff4c" alpha="255" label="Grassland"></paletteEntry>
        <paletteEntry value="40" color="#f096ff" alpha="255" label="Cropland"></paletteEntry>
        <paletteEntry value="50" color="#fa0000" alpha="255" label="Built-up"></paletteEntry>
        <paletteEntry value="60" color="#b4b4b4" alpha="255" label="Bare / sparse vegetation"></paletteEntry>
        <paletteEntry value="70" color="#f0f0f0" alpha="255" label="Snow and ice"></paletteEntry>
        <paletteEntry value="80" color="#0064c8" alpha="255" label="Permanent water bodies"></paletteEntry>
        <paletteEntry value="90" color="#0096a0" alpha="255" label="Herbaceous wetland"></paletteEntry>
        <paletteEntry value="95" color="#00cf75" alpha="255" label="Mangroves"></paletteEntry>
        <paletteEntry value="100" color="#fae6a0" alpha="255" label="Moss and lichen"></paletteEntry>
      </colorPalette>
    </rasterrenderer>
  </pipe>
</qgis>
