"""Face models and the face stages. Models as data (models: families, model sets, the catalogue
that gathers them, licences), the face analysis's model set (analysis), how each family is fed
(convention), the pinned files (registry) and their fetch (fetch), sessions (sessions); detect
(detect), align to a model's template (align), embed (embed), classify age and gender (classify),
order and select faces (order, select), track them through a video (track); swap (swap), paste
back (pasteback), masks (masks, their vocabulary in maskspec), enhance (enhance), change age
(age), anonymize (anonymize), upscale tiled (upscale), label (label); the background's matte
(matte); the frame's colour (colorize); shared typed values (types)."""
