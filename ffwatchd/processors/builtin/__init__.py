"""The built-in processors, one module each; the registry finds every module here: face_swapper,
face_enhancer, age_modifier, face_anonymizer, frame_enhancer (the upscaler), background_remover,
frame_colorizer, face_debugger (review pictures beside the result), label."""
