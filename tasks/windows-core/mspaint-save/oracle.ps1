$ErrorActionPreference = "Stop"
Add-Type -AssemblyName System.Drawing
$bitmap = New-Object System.Drawing.Bitmap 64, 64
$random = New-Object System.Random 7
for ($x = 0; $x -lt 64; $x++) {
    for ($y = 0; $y -lt 64; $y++) {
        $bitmap.SetPixel($x, $y, [System.Drawing.Color]::FromArgb($random.Next(256), $random.Next(256), $random.Next(256)))
    }
}
$bitmap.Save("C:\evals\drawing.png", [System.Drawing.Imaging.ImageFormat]::Png)
$bitmap.Dispose()
